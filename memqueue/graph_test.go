package memqueue_test

import (
	"errors"
	"testing"
	"time"

	"github.com/meridianjobs/meridian/dag"
	"github.com/meridianjobs/meridian/internal/testutil"
	"github.com/meridianjobs/meridian/memqueue"
	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// TestFinishedGraphsForgotten checks memqueue's rule for pruning graphs,
// which the conformance suite's FinishedGraphPruned (by time) skips: a
// Queue keeps 1,000 graphs, forgetting the oldest finished ones as new
// ones come, and never a graph still running, however old.
func TestFinishedGraphsForgotten(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	q := memqueue.New()
	dispatch := func(queueName string) string {
		j, err := queue.NewJob(importRow{1}, queue.OnQueue(queueName))
		if err != nil {
			t.Fatal(err)
		}
		id, err := dag.Dispatch(ctx, q, dag.New("g").Add("only", j))
		if err != nil {
			t.Fatalf("dag.Dispatch: %v", err)
		}
		return id
	}
	running := dispatch("never") // its node is never reserved
	const n = 1500
	ids := make([]string, n)
	for i := range ids {
		ids[i] = dispatch("g")
		jobs, err := q.Reserve(ctx, []string{"g"}, 1, time.Minute)
		if err != nil || len(jobs) != 1 {
			t.Fatalf("Reserve = %d jobs, %v", len(jobs), err)
		}
		if err := testutil.Complete(ctx, q, driver.Completion{Lease: jobs[0].Lease(), Outcome: driver.OutcomeDone, Graph: ids[i]}); err != nil {
			t.Fatalf("Complete of a node: %v", err)
		}
	}
	for _, c := range []struct {
		id   string
		kept bool
	}{{running, true}, {ids[0], false}, {ids[n-1000], false}, {ids[n-999], true}, {ids[n-1], true}} {
		_, _, err := q.GetGraph(ctx, c.id)
		if c.kept && err != nil || !c.kept && !errors.Is(err, queue.ErrNotFound) {
			t.Errorf("GetGraph(%s) = %v; kept %v", c.id, err, c.kept)
		}
	}
}
