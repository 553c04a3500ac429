package dashboard_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/meridianjobs/meridian/dashboard"
	"github.com/meridianjobs/meridian/internal/testutil"
	"github.com/meridianjobs/meridian/memqueue"
	"github.com/meridianjobs/meridian/queue"
)

type sendWelcomeEmail struct{ UserID int }

// waitFor waits up to five seconds for cond.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testutil.Eventually(t, 5*time.Second, cond, "timed out waiting for %s", what)
}

// A job fails for good under a real worker, shows up in the dashboard with
// the worker, is retried from the dashboard and then succeeds.
func TestWorkerFailureRetriedFromTheDashboard(t *testing.T) {
	t.Parallel()
	q := memqueue.New()
	var calls, done atomic.Int32
	w := queue.NewWorker(q).Slog(slog.New(slog.DiscardHandler)).MaxRetry(1).Poll(10 * time.Millisecond).Concurrency(2)
	queue.Handle(w, func(ctx context.Context, j sendWelcomeEmail) error {
		if calls.Add(1) == 1 {
			return errors.New("smtp: try later")
		}
		done.Add(1)
		return nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-errc
	})
	id, _, err := queue.Enqueue(ctx, q, sendWelcomeEmail{UserID: 42}, queue.OnQueue(queue.DefaultQueue))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the job to fail", func() bool {
		j, err := q.GetJob(ctx, id)
		return err == nil && j.State == queue.StateDead
	})

	s := serve(t, dashboard.ForQueue(q))
	list := s.page("failed")
	if got := rowIDs(list.Doc); len(got) != 1 || got[0] != id {
		t.Fatalf("failed list = %v, want [%s]", got, id)
	}
	if ws := findAll(s.page("workers").Doc, func(n *html.Node) bool { return n.Data == "tr" && n.Parent.Data == "tbody" }); len(ws) != 1 {
		t.Errorf("workers page lists %d workers, want the running one", len(ws))
	}
	after := s.follow(s.submit(s.url("failed"), formWithAction(list.Doc, "failed/"+id+"/retry"), nil, nil))
	if got := rowIDs(after.Doc); len(got) != 0 {
		t.Errorf("after retry the failed list = %v", got)
	}
	waitFor(t, "the retried job to succeed", func() bool { return done.Load() == 1 })

	// The handler returns before the worker acks and records the run, and
	// the dashboard shares its figures for a moment: poll until they agree.
	var sv dashboard.StatsView
	if !testutil.WaitFor(10*time.Second, func() bool {
		sv = dashboard.StatsView{}
		if err := json.Unmarshal([]byte(s.page("api/stats").Body), &sv); err != nil {
			t.Fatal(err)
		}
		return len(sv.Queues) == 1 && sv.Totals.Processed == 1 && sv.Totals.Failed == 1
	}) {
		t.Fatalf("stats after the run: %d queues, processed %d, failed %d; want 1, 1 and 1", len(sv.Queues), sv.Totals.Processed, sv.Totals.Failed)
	}
}

// Driver mode: the dashboard over a queue, mounted under /admin.
func Example_driverMode() {
	ctx := context.Background()
	q := memqueue.New()
	_ = queue.Dispatch(ctx, q, sendWelcomeEmail{UserID: 42}, queue.OnQueue("emails"))

	mux := http.NewServeMux()
	mux.Handle("/admin/queues/", http.StripPrefix("/admin", dashboard.Handler(dashboard.ForQueue(q))))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	res, err := http.Get(srv.URL + "/admin/queues/api/stats")
	if err != nil {
		panic(err)
	}
	defer res.Body.Close()
	var sv dashboard.StatsView
	_ = json.NewDecoder(res.Body).Decode(&sv)
	for _, qs := range sv.Queues {
		fmt.Printf("%s: ready %d, failed %d\n", qs.Queue, qs.Ready.N, qs.Dead.N)
	}
	// Output:
	// emails: ready 1, failed 0
}

// The cookbook's dashboard wiring, line for line apart from the mux and the
// driver constructor, over a real worker.
func TestCookbookWiringWithWorker(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	q := memqueue.New()

	stats := dashboard.NewStats()
	failed := dashboard.NewMemoryFailedJobs(func(ctx context.Context, j queue.Job) error {
		return q.Push(ctx, j) // put the job back on the queue
	})
	w := queue.NewWorker(q).Slog(slog.New(slog.DiscardHandler)).MaxRetry(1).Poll(10 * time.Millisecond).OnFailed(func(j queue.Job, err error) {
		stats.OnFailed("default")
		failed.Record(j, "default", err) // dead-letter it
	})
	var fail atomic.Bool
	fail.Store(true)
	queue.Handle(w, func(ctx context.Context, j sendWelcomeEmail) error {
		if fail.Load() {
			return errors.New("smtp down")
		}
		stats.OnProcessed("default")
		return nil
	})
	errc := make(chan error, 1)
	go func() { errc <- w.Run(ctx) }()
	defer func() {
		cancel()
		<-errc
	}()
	insp := dashboard.NewInspector(stats, failed)
	mux := http.NewServeMux()
	mux.Handle("/admin/queues/", http.StripPrefix("/admin", dashboard.Handler(insp)))

	stats.OnPushed("default")
	if err := queue.Dispatch(ctx, q, sendWelcomeEmail{UserID: 42}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the failure to be recorded", func() bool { return failed.Len() == 1 })
	list, err := failed.List(ctx)
	if err != nil || list[0].Err != "smtp down" || list[0].Queue != "default" {
		t.Fatalf("failed list: %+v, %v", list, err)
	}
	// The recorded job is the dead letter itself: push it again to retry.
	fail.Store(false)
	stats.OnPushed("default")
	if err := failed.Retry(ctx, list[0].ID); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the retried job to run", func() bool {
		sv, _ := insp.Stats()
		return len(sv.Queues) == 1 && sv.Queues[0].Processed == 1
	})
	sv, _ := insp.Stats()
	qs := sv.Queues[0]
	got := fmt.Sprintf("%s: processed=%d failed=%d pending=%d", qs.Queue, qs.Processed, qs.Failed, qs.Pending)
	if want := "default: processed=1 failed=1 pending=0"; got != want || sv.Totals.Failed != 1 {
		t.Errorf("stats = %q (total failed %d), want %q", got, sv.Totals.Failed, want)
	}
	smp := dashboard.NewSampler(insp, 5*time.Second, time.Minute).Start()
	defer smp.Stop()
	if w := smp.Window("default"); len(w) != 1 || w[0].Processed != 1 || smp.Rate("default") != 0 {
		t.Errorf("sampler after its first sample: %+v, rate %v", w, smp.Rate("default"))
	}
}
