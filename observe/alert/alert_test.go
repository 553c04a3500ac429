package alert_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/meridianjobs/meridian/internal/observetest"
	"github.com/meridianjobs/meridian/memqueue"
	"github.com/meridianjobs/meridian/observe/alert"
	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// calls records hook calls.
type calls struct {
	mu     sync.Mutex
	alerts []alert.Alert
}

func (c *calls) hook(_ context.Context, a alert.Alert) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.alerts = append(c.alerts, a)
	return nil
}

// take returns the calls so far and forgets them.
func (c *calls) take() []alert.Alert {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.alerts
	c.alerts = nil
	return out
}

// checkAll runs Check on every alerter at once, rounds times.
func checkAll(t *testing.T, rounds int, as ...*alert.Alerter) {
	t.Helper()
	for range rounds {
		var wg sync.WaitGroup
		errs := make(chan error, len(as))
		for _, a := range as {
			wg.Go(func() { errs <- a.Check(context.Background()) })
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
	}
}

func expectOne(t *testing.T, c *calls, firing bool) {
	t.Helper()
	got := c.take()
	if len(got) != 1 || got[0].Firing != firing || got[0].Queue != "slow" || got[0].Kind != alert.KindWait {
		t.Fatalf("hook calls %+v, want one wait alert on slow with firing=%v", got, firing)
	}
}

func TestLongWaitOnceAcrossTwoProcesses(t *testing.T) {
	t.Parallel()
	table := observetest.RandomTable()
	q1 := observetest.Postgres(t, table, true)
	q2 := observetest.Postgres(t, table, false)
	dsn := observetest.PostgresDSN(t)
	claims := table + "_alerts"
	ctx := context.Background()

	var hooks calls
	var alerters []*alert.Alerter
	for i, q := range []*struct{ driver.Inspector }{{q1}, {q2}} {
		db, err := sql.Open("pgx", dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		claimer, err := alert.NewSQLClaimer(ctx, db, claims)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			t.Cleanup(func() {
				if _, err := db.Exec("DROP TABLE " + claims); err != nil {
					t.Errorf("dropping the claim table: %v", err)
				}
			})
		}
		alerters = append(alerters, alert.New(q, hooks.hook, alert.WithClaimer(claimer),
			alert.WithThresholds(alert.Threshold{Queue: "slow", MaxWait: 30 * time.Minute})))
	}

	checkAll(t, 2, alerters...)
	if got := hooks.take(); len(got) != 0 {
		t.Fatalf("hook called with nothing waiting: %+v", got)
	}
	// A job that has been ready for an hour.
	if err := queue.Dispatch(ctx, q1, observetest.Task{N: 1}, queue.OnQueue("slow"), queue.At(time.Now().Add(-time.Hour))); err != nil {
		t.Fatal(err)
	}
	checkAll(t, 3, alerters...)
	expectOne(t, &hooks, true)
	for i, a := range alerters {
		if f := a.Firing(); len(f) != 1 || f[0].Queue != "slow" || f[0].Value < 3600 {
			t.Errorf("alerter %d: Firing = %+v", i, f)
		}
	}
	if _, err := q2.Purge(ctx, "slow"); err != nil {
		t.Fatal(err)
	}
	checkAll(t, 3, alerters...)
	expectOne(t, &hooks, false)
	for i, a := range alerters {
		if f := a.Firing(); len(f) != 0 {
			t.Errorf("alerter %d: Firing = %+v after the wait cleared", i, f)
		}
	}
	if err := queue.Dispatch(ctx, q2, observetest.Task{N: 2}, queue.OnQueue("slow"), queue.At(time.Now().Add(-time.Hour))); err != nil {
		t.Fatal(err)
	}
	checkAll(t, 2, alerters...)
	expectOne(t, &hooks, true)
}

func TestFailureRateOnlyOnTheLeader(t *testing.T) {
	t.Parallel()
	q := memqueue.New()
	settled := observetest.NewSettled()
	w := queue.NewWorker(q).Queues("slow").MaxRetry(3).Backoff(0).Observer(settled).Slog(observetest.Quiet())
	queue.Handle(w, observetest.HandleTask)
	if err := observetest.Dispatch(context.Background(), q, "slow"); err != nil {
		t.Fatal(err)
	}
	stop := observetest.RunWorker(w)
	if err := settled.Wait(60 * time.Second); err != nil {
		_ = stop()
		t.Fatal(err)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	var leader, follower calls
	th := alert.WithThresholds(alert.Threshold{MaxFailureRate: 0.3, MinRuns: 5})
	a := alert.New(q, leader.hook, th, alert.WithLeader(func(context.Context) bool { return true }))
	b := alert.New(q, follower.hook, th, alert.WithLeader(func(context.Context) bool { return false }))
	checkAll(t, 2, a, b)
	got := leader.take()
	want := float64(observetest.WantFailed) / float64(observetest.WantAttempts)
	if len(got) != 1 || !got[0].Firing || got[0].Kind != alert.KindFailureRate || got[0].Value != want {
		t.Fatalf("leader's hook calls %+v, want one failure-rate crossing at %v", got, want)
	}
	if f := follower.take(); len(f) != 0 {
		t.Fatalf("the follower called its hook: %+v", f)
	}
	if f := b.Firing(); len(f) != 1 || f[0].Kind != alert.KindFailureRate {
		t.Errorf("the follower's Firing = %+v", f)
	}

	// Above the limit but with too few runs: not firing.
	c := alert.New(q, leader.hook, alert.WithThresholds(alert.Threshold{MaxFailureRate: 0.3, MinRuns: 100}))
	checkAll(t, 1, c)
	if f := leader.take(); len(f) != 0 {
		t.Errorf("fired below MinRuns: %+v", f)
	}
}

func TestWebhook(t *testing.T) {
	t.Parallel()
	var got alert.WebhookBody
	var ctype, method string
	status := http.StatusOK
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		method, ctype = r.Method, r.Header.Get("Content-Type")
		if err := json.NewDecoder(r.Body).Decode(&got); err != nil {
			t.Errorf("decoding the body: %v", err)
		}
		w.WriteHeader(status)
	}))
	defer srv.Close()
	hook := alert.Webhook(srv.URL, srv.Client())
	a := alert.Alert{Queue: "emails", Kind: alert.KindWait, Firing: true, Value: 754, Limit: 300, At: time.Unix(1e9, 0).UTC()}
	if err := hook(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	want := "Meridian: queue emails long wait crossed: the oldest ready job has waited 12m34s (limit 5m0s)"
	if method != http.MethodPost || ctype != "application/json" || got.Text != want || got.Queue != "emails" || !got.Firing || got.Limit != 300 {
		t.Errorf("%s %s %+v, want a JSON POST with text %q", method, ctype, got, want)
	}
	status = http.StatusInternalServerError
	if err := hook(context.Background(), a); err == nil || !strings.Contains(err.Error(), "500") {
		t.Errorf("a 500 gave %v", err)
	}
}

func TestSQLClaimerRejectsBadTableNames(t *testing.T) {
	t.Parallel()
	if _, err := alert.NewSQLClaimer(context.Background(), nil, "x; DROP TABLE y"); err == nil {
		t.Fatal("accepted a table name that is not an identifier")
	}
}

// With queue.Leader deciding who calls hooks, two processes over one store
// (two handles on one PostgreSQL table) call the hook once per transition.
func TestLongWaitOnceWithQueueLeader(t *testing.T) {
	t.Parallel()
	table := observetest.RandomTable()
	q1 := observetest.Postgres(t, table, true)
	q2 := observetest.Postgres(t, table, false)
	ctx, cancel := context.WithCancel(context.Background())
	var hooks calls
	var alerters []*alert.Alerter
	var leaders []*queue.Leader
	var wg sync.WaitGroup
	for _, q := range []queue.Queue{q1, q2} {
		l, err := queue.NewLeader(q, "alerts", queue.LeaderTTL(5*time.Second), queue.LeaderLogger(observetest.Quiet()))
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() { _ = l.Run(ctx) })
		leaders = append(leaders, l)
		alerters = append(alerters, alert.New(q.(driver.Inspector), hooks.hook,
			alert.WithElection(l),
			alert.WithThresholds(alert.Threshold{Queue: "slow", MaxWait: 30 * time.Minute})))
	}
	defer func() { cancel(); wg.Wait() }()
	deadline := time.Now().Add(10 * time.Second)
	for !leaders[0].IsLeader() && !leaders[1].IsLeader() {
		if time.Now().After(deadline) {
			t.Fatal("neither process became the leader")
		}
		select {
		case <-leaders[0].Changed():
		case <-leaders[1].Changed():
		case <-time.After(time.Second):
		}
	}
	if leaders[0].IsLeader() && leaders[1].IsLeader() {
		t.Fatal("both processes lead")
	}
	if err := queue.Dispatch(ctx, q1, observetest.Task{N: 1}, queue.OnQueue("slow"), queue.At(time.Now().Add(-time.Hour))); err != nil {
		t.Fatal(err)
	}
	checkAll(t, 3, alerters...)
	expectOne(t, &hooks, true)
	for i, a := range alerters {
		if f := a.Firing(); len(f) != 1 {
			t.Errorf("alerter %d (leading: %v): Firing = %+v", i, leaders[i].IsLeader(), f)
		}
	}
}

// A claim made under a stale Fence is refused and changes nothing; one
// under the lease's current epoch goes through.
func TestSQLClaimerFenced(t *testing.T) {
	t.Parallel()
	table := observetest.RandomTable()
	q1 := observetest.Postgres(t, table, true)
	ctx := context.Background()
	db, err := sql.Open("pgx", observetest.PostgresDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	claims := table + "_alerts"
	claimer, err := alert.NewSQLClaimer(ctx, db, claims, alert.FencedBy(table+"_meta"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := db.Exec("DROP TABLE " + claims); err != nil {
			t.Errorf("dropping the claim table: %v", err)
		}
	})
	l := queue.Queue(q1).(driver.Scheduler)
	old, ok, err := l.AcquireLeaseEpoch(ctx, "alerts", "a", 200*time.Millisecond)
	if err != nil || !ok {
		t.Fatalf("AcquireLeaseEpoch = %v, %v", ok, err)
	}
	stale := driver.WithFence(ctx, driver.Fence{Lease: "alerts", Epoch: old})
	if won, err := claimer.Claim(stale, "wait:slow", true); err != nil || !won {
		t.Fatalf("Claim under the current epoch = %v, %v; want won", won, err)
	}
	var newer int64
	for deadline := time.Now().Add(10 * time.Second); ; {
		if newer, ok, err = l.AcquireLeaseEpoch(ctx, "alerts", "b", time.Minute); err != nil || ok || time.Now().After(deadline) {
			break
		}
		<-time.After(50 * time.Millisecond)
	}
	if err != nil || !ok {
		t.Fatalf("b could not take the expired lease: %v, %v", ok, err)
	}
	if won, err := claimer.Claim(stale, "wait:slow", false); !errors.Is(err, queue.ErrFenced) || won {
		t.Fatalf("Claim under the stale epoch %d (lease at %d) = %v, %v; want ErrFenced", old, newer, won, err)
	}
	fresh := driver.WithFence(ctx, driver.Fence{Lease: "alerts", Epoch: newer})
	if won, err := claimer.Claim(fresh, "wait:slow", true); err != nil || won {
		t.Fatalf("Claim of firing under the new epoch = %v, %v; want not won (the refused clear left it firing)", won, err)
	}
	if won, err := claimer.Claim(fresh, "wait:slow", false); err != nil || !won {
		t.Fatalf("Claim of clear under the new epoch = %v, %v; want won", won, err)
	}
}
