package dashboard_test

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meridianjobs/meridian/dashboard"
	"github.com/meridianjobs/meridian/memqueue"
	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// bulkCountingQueue is a memqueue that counts the one-job and the bulk calls
// the dashboard makes.
type bulkCountingQueue struct {
	*memqueue.Queue
	single, bulk atomic.Int64
}

func (c *bulkCountingQueue) RetryDead(ctx context.Context, id string) error {
	c.single.Add(1)
	return c.Queue.RetryDead(ctx, id)
}

func (c *bulkCountingQueue) ForgetDead(ctx context.Context, id string) error {
	c.single.Add(1)
	return c.Queue.ForgetDead(ctx, id)
}

func (c *bulkCountingQueue) Cancel(ctx context.Context, id string) (driver.JobState, error) {
	c.single.Add(1)
	return c.Queue.Cancel(ctx, id)
}

func (c *bulkCountingQueue) ActOn(ctx context.Context, f driver.JobFilter, a driver.BulkAction, limit int, rec driver.Action) (int, error) {
	c.bulk.Add(1)
	return c.Queue.ActOn(ctx, f, a, limit, rec)
}

// noBulk hides the driver's driver.Controller: the dashboard falls back to
// one call per listed job.
type noBulk struct {
	queue.Queue
	driver.Inspector
}

func TestBulkMatchingActions(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		wrap     func(*memqueue.Queue) (queue.Queue, func() (single, bulk int64))
		preview  string // what the confirmation says
		wantBulk bool
	}{
		{"set-based through driver.Controller", func(m *memqueue.Queue) (queue.Queue, func() (int64, int64)) {
			c := &bulkCountingQueue{Queue: m}
			return c, func() (int64, int64) { return c.single.Load(), c.bulk.Load() }
		}, "4 failed job(s) match", true},
		{"one call per job without it", func(m *memqueue.Queue) (queue.Queue, func() (int64, int64)) {
			return noBulk{m, m}, func() (int64, int64) { return -1, 0 }
		}, "up to 500", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := memqueue.New()
			mail := deadJobs(t, m, "mail", 4, `{"to":"ann"}`, "smtp down")
			other := deadJobs(t, m, "other", 2, `{"to":"ann"}`, "smtp down")
			q, calls := tt.wrap(m)
			s := serve(t, dashboard.ForQueue(q))

			r := s.follow(s.confirmMatching("failed?queue=mail", "retry-matching", tt.preview))
			if !strings.Contains(flashOf(r.Doc), "Retried 4 job") {
				t.Errorf("flash after retry all matching = %q", flashOf(r.Doc))
			}
			for _, id := range mail {
				if j, _ := m.GetJob(context.Background(), id); j.State != queue.StateReady {
					t.Errorf("job %s of mail is %s after retry all matching, want ready", id, j.State)
				}
			}
			for _, id := range other {
				if j, _ := m.GetJob(context.Background(), id); j.State != queue.StateDead {
					t.Errorf("job %s of another queue is %s, want dead", id, j.State)
				}
			}
			single, bulk := calls()
			if tt.wantBulk && (single != 0 || bulk != 1) {
				t.Errorf("retry all matching made %d one-job calls and %d bulk calls, want 0 and 1", single, bulk)
			}
			// The figures read after the action show it at once.
			if c := s.page("failed?queue=mail"); len(rowIDs(c.Doc)) != 0 {
				t.Errorf("failed list of mail after the retry: %d rows", len(rowIDs(c.Doc)))
			}
		})
	}
}

// TestConfirmNothingToDo: a confirmation with nothing matching says so and
// offers no button.
func TestConfirmNothingToDo(t *testing.T) {
	t.Parallel()
	m := memqueue.New()
	deadJobs(t, m, "mail", 1, `{}`, "x")
	s := serve(t, dashboard.ForQueue(m))
	r := s.page("confirm?do=forget&queue=elsewhere")
	if got := text(find(r.Doc, byID("confirm-count"))); !strings.Contains(got, "No failed jobs match") || find(r.Doc, byID("confirm-bulk")) != nil {
		t.Errorf("confirmation with nothing to forget says %q (button: %v)", got, find(r.Doc, byID("confirm-bulk")) != nil)
	}
	for _, bad := range []string{"confirm?do=drop", "confirm?do=cancel&state=dead", "confirm?do=retry&state=ready&queue=x"} {
		// A retry always acts on failed jobs; state= is ignored there.
		want := http.StatusBadRequest
		if strings.Contains(bad, "do=retry") {
			want = http.StatusOK
		}
		if got := s.get(s.url(bad)).StatusCode; got != want {
			t.Errorf("GET %s: %d, want %d", bad, got, want)
		}
	}
}

// TestFlushFollowsTheFilter: "Flush" acts on the queue filter and is not
// offered under a name, tag or payload filter, which it would ignore.
func TestFlushFollowsTheFilter(t *testing.T) {
	t.Parallel()
	m := memqueue.New()
	deadJobs(t, m, "mail", 1, `{}`, "x")
	s := serve(t, dashboard.ForQueue(m))
	tests := []struct {
		rel  string
		want string // the button's text, "" for none
	}{
		{"failed", "Flush all"},
		{"failed?queue=mail", "Flush queue mail"},
		{"failed?queue=mail&name=SendEmail", ""},
		{"failed?tag=x", ""},
		{"failed?q=abc", ""},
	}
	for _, tt := range tests {
		b := find(s.page(tt.rel).Doc, byID("flush"))
		switch {
		case tt.want == "" && b != nil:
			t.Errorf("%s offers %q", tt.rel, text(b))
		case tt.want != "" && (b == nil || strings.TrimSpace(text(b)) != tt.want):
			t.Errorf("%s: flush button %v, want %q", tt.rel, b != nil, tt.want)
		}
	}
}

// slowBulk is a BulkSource whose action changes a few jobs and then waits
// for its context to end, as a big action on a slow store would.
type slowBulk struct {
	dashboard.Source
	done int
}

func (s slowBulk) CountMatching(context.Context, dashboard.ListQuery, int) (driver.Count, error) {
	return driver.Count{N: 10000, More: true}, nil
}

func (s slowBulk) ActOnMatching(ctx context.Context, _ dashboard.ListQuery, _ driver.BulkAction, _ int) (int, error) {
	<-ctx.Done()
	return s.done, ctx.Err()
}

// TestBulkMatchingStopsInTime: an action that cannot finish within the
// request's time answers with how many jobs it changed and asks for
// another click, rather than failing the request.
func TestBulkMatchingStopsInTime(t *testing.T) {
	t.Parallel()
	m := memqueue.New()
	deadJobs(t, m, "mail", 1, `{}`, "x")
	s := serve(t, slowBulk{dashboard.ForQueue(m), 7}, dashboard.RequestTimeout(200*time.Millisecond))
	r := s.follow(s.confirmMatching("failed?queue=mail", "retry-matching", "More than 10,000"))
	if got := flashOf(r.Doc); !strings.Contains(got, "Acted on 7 job(s); more match") {
		t.Errorf("flash after an action cut short = %q", got)
	}
}
