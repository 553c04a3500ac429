package dashboard_test

import (
	"strings"
	"testing"
	"time"

	"github.com/meridianjobs/meridian/dashboard"
	"github.com/meridianjobs/meridian/memqueue"
	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// TestJobPageShowsResult: a done job kept by the store shows the result
// its handler set; one acked without a result shows no result card.
func TestJobPageShowsResult(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	q := memqueue.New(memqueue.WithRetention(10))
	for range 2 {
		if err := queue.Dispatch(ctx, q, struct{ N int }{1}); err != nil {
			t.Fatal(err)
		}
	}
	jobs, err := q.Reserve(ctx, nil, 2, time.Minute)
	if err != nil || len(jobs) != 2 {
		t.Fatalf("Reserve: %v, %v", jobs, err)
	}
	outs := []driver.Completion{
		{Lease: jobs[0].Lease(), Outcome: driver.OutcomeDone, Result: []byte(`{"rows":42}`), ResultUntil: time.Now().Add(time.Hour)},
		{Lease: jobs[1].Lease(), Outcome: driver.OutcomeDone},
	}
	if _, errs, err := q.Complete(ctx, nil, outs); err != nil || errs[0] != nil || errs[1] != nil {
		t.Fatalf("Complete: %v %v", errs, err)
	}
	s := serve(t, dashboard.ForQueue(q))
	n := find(s.page("jobs/"+jobs[0].ID).Doc, byID("result"))
	if n == nil || text(n) == "" {
		t.Fatalf("the job page of a job with a result has no result card")
	}
	if got := strings.Join(strings.Fields(text(n)), ""); got != `{"rows":42}` {
		t.Errorf("result shown as %q, want the stored JSON", got)
	}
	if find(s.page("jobs/"+jobs[1].ID).Doc, byID("result")) != nil {
		t.Errorf("the job page of a job without a result shows a result card")
	}
}
