package dashboard_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/meridianjobs/meridian/dashboard"
	"github.com/meridianjobs/meridian/internal/testutil"
	"github.com/meridianjobs/meridian/memqueue"
	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// TestWaitsAndUnservedQueues checks the figures beside the counts: the
// oldest ready job's wait per queue and in total, the live processes, a
// warning on a queue with ready jobs that no live worker serves, and "—"
// where nothing has run.
func TestWaitsAndUnservedQueues(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := memqueue.New()
	now := time.Now()
	for _, j := range []queue.Job{
		{Queue: "emails", Name: "e", AvailableAt: now.Add(-10 * time.Minute)},
		{Queue: "reports", Name: "r", AvailableAt: now.Add(-2 * time.Hour)},
		{Queue: "reports", Name: "r", AvailableAt: now.Add(-time.Hour)},
	} {
		if err := q.Push(ctx, j); err != nil {
			t.Fatal(err)
		}
	}
	if err := q.Heartbeat(ctx, driver.WorkerInfo{ID: "w-1", Host: "box", PID: 9, Queues: []string{"emails"}, Concurrency: 4, StartedAt: now, LastSeen: now}); err != nil {
		t.Fatal(err)
	}
	s := serve(t, dashboard.ForQueue(q))

	st := decode(t, s.page("api/stats").Body)
	if st["processes"] != 1.0 {
		t.Errorf("processes = %v, want 1", st["processes"])
	}
	byQueue := map[string]map[string]any{}
	for _, x := range st["queues"].([]any) {
		m := x.(map[string]any)
		byQueue[m["queue"].(string)] = m
	}
	for _, tc := range []struct {
		queue    string
		wait     time.Duration
		unserved bool
	}{
		{"emails", 10 * time.Minute, false},
		{"reports", 2 * time.Hour, true},
	} {
		m := byQueue[tc.queue]
		got := time.Duration(m["max_wait_ms"].(float64) * float64(time.Millisecond))
		if got < tc.wait || got > tc.wait+time.Minute {
			t.Errorf("%s max_wait_ms = %v, want about %v", tc.queue, got, tc.wait)
		}
		if u, _ := m["unserved"].(bool); u != tc.unserved {
			t.Errorf("%s unserved = %v, want %v", tc.queue, u, tc.unserved)
		}
	}
	tot := st["totals"].(map[string]any)
	if got := time.Duration(tot["max_wait_ms"].(float64) * float64(time.Millisecond)); got < 2*time.Hour {
		t.Errorf("totals max_wait_ms = %v, want the oldest queue's (2h)", got)
	}

	body := s.page("").Body
	for _, want := range []string{
		"2 ready jobs wait and no live worker serves this queue",
		`data-stat="processes">1<`,
		`<td class="num">—</td>`, // nothing has run: no runtime or wait yet
	} {
		if !strings.Contains(body, want) {
			t.Errorf("overview lacks %q", want)
		}
	}
	if strings.Contains(body, "1 ready jobs wait and no live worker") {
		t.Error("overview warns about emails, which a live worker serves")
	}
}

// TestFailedPastWeek checks the overview's and api/stats' count of the
// jobs dead-lettered in the last seven days (queue.RecentDeadCounter).
func TestFailedPastWeek(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := memqueue.New()
	for i := range 3 {
		if err := q.Push(ctx, queue.Job{Queue: "emails", Name: "e"}); err != nil {
			t.Fatal(err)
		}
		got, err := q.Reserve(ctx, []string{"emails"}, 1, time.Minute)
		if err != nil || len(got) != 1 {
			t.Fatalf("Reserve %d: %d jobs, %v", i, len(got), err)
		}
		if i < 2 {
			if err := testutil.Fail(ctx, q, got[0].Lease(), "broken"); err != nil {
				t.Fatal(err)
			}
		}
	}
	s := serve(t, dashboard.ForQueue(q))
	st := decode(t, s.page("api/stats").Body)
	if got, _ := st["failed_past_7_days"].(map[string]any); got["n"] != 2.0 {
		t.Errorf("failed_past_7_days = %v, want {n: 2}", st["failed_past_7_days"])
	}
	if body := s.page("").Body; !strings.Contains(body, `data-stat="failed-week">2<`) {
		t.Error("overview lacks the failed-in-the-past-7-days card with 2")
	}
}

// flaky is a memqueue whose QueueStats fails while fail is set.
type flaky struct {
	*memqueue.Queue
	fail atomic.Bool
}

func (f *flaky) QueueStats(ctx context.Context) ([]driver.QueueStats, error) {
	if f.fail.Load() {
		return nil, errors.New("store timed out")
	}
	return f.Queue.QueueStats(ctx)
}

// TestFiguresStaleOnFailure checks that a failed read of the figures
// serves the last good ones marked stale, and an error only when there
// were none.
func TestFiguresStaleOnFailure(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		f := &flaky{Queue: memqueue.New()}
		if err := f.Push(ctx, queue.Job{Queue: "q", Name: "n"}); err != nil {
			t.Fatal(err)
		}
		qi := dashboard.ForQueue(f)
		f.fail.Store(true)
		if _, err := qi.Figures(ctx); err == nil {
			t.Fatal("Figures with no good read yet = nil error, want the store's")
		}
		f.fail.Store(false)
		good, err := qi.Figures(ctx)
		if err != nil || good.Stale || good.Totals.Ready.N != 1 {
			t.Fatalf("Figures = stale %v, ready %d, %v; want fresh, 1", good.Stale, good.Totals.Ready.N, err)
		}
		f.fail.Store(true)
		time.Sleep(time.Minute) // past the shared read's lifetime
		got, err := qi.Figures(ctx)
		if err != nil || !got.Stale || !got.At.Equal(good.At) || got.Totals.Ready.N != 1 {
			t.Fatalf("Figures after a failure = stale %v at %v, ready %d, %v; want the last good ones (at %v) marked stale",
				got.Stale, got.At, got.Totals.Ready.N, err, good.At)
		}
	})
}

// staleSource serves its Source's figures marked stale.
type staleSource struct{ dashboard.Source }

func (s staleSource) Figures(ctx context.Context) (dashboard.StatsView, error) {
	sv, err := s.Source.Figures(ctx)
	sv.Stale = true
	return sv, err
}

// TestStaleFiguresShown checks that stale figures are marked on the
// overview and in api/stats.
func TestStaleFiguresShown(t *testing.T) {
	t.Parallel()
	s := serve(t, staleSource{dashboard.ForQueue(memqueue.New())})
	if body := s.page("").Body; !strings.Contains(body, "(stale)") {
		t.Error("overview does not mark stale figures")
	}
	if st := decode(t, s.page("api/stats").Body); st["stale"] != true {
		t.Errorf("api/stats stale = %v, want true", st["stale"])
	}
}

// slowFigures is a Source whose Figures answers only when its context
// ends.
type slowFigures struct{ dashboard.Source }

func (slowFigures) Figures(ctx context.Context) (dashboard.StatsView, error) {
	<-ctx.Done()
	return dashboard.StatsView{}, ctx.Err()
}

// TestListDoesNotWaitForFigures checks that a list page whose figures do
// not come shows its rows, with tabs but no counts, soon after the list
// is read.
func TestListDoesNotWaitForFigures(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		q := memqueue.New()
		if err := q.Push(context.Background(), queue.Job{ID: "job-1", Queue: "q", Name: "n"}); err != nil {
			t.Fatal(err)
		}
		h := dashboard.Handler(slowFigures{dashboard.ForQueue(q)})
		ctx, cancel := context.WithCancel(context.Background())
		req := httptest.NewRequestWithContext(ctx, http.MethodGet, "/queues/jobs?state=ready", nil) // as StripPrefix("/admin") leaves it
		req.RemoteAddr = "127.0.0.1:40000"
		rec := httptest.NewRecorder()
		start := time.Now()
		h.ServeHTTP(rec, req)
		took := time.Since(start)
		cancel()
		if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "job-1") {
			t.Fatalf("GET jobs?state=ready = %d without the job:\n%s", rec.Code, rec.Body.String())
		}
		if took > time.Second {
			t.Errorf("the list took %v (fake clock): it waited for the figures", took)
		}
		if strings.Contains(rec.Body.String(), `class="count"`) {
			t.Error("tabs show counts the figures never gave")
		}
	})
}
