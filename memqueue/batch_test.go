package memqueue_test

import (
	"errors"
	"testing"
	"time"

	"github.com/meridianjobs/meridian/internal/testutil"
	"github.com/meridianjobs/meridian/memqueue"
	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// importRow is a batch member's payload.
type importRow struct{ N int }

// TestFinishedBatchesForgotten checks that a Queue keeps the newest 1,000
// finished batches and forgets older ones, while a batch still running is
// kept however old.
func TestFinishedBatchesForgotten(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	q := memqueue.New()
	push := func() string {
		j, err := queue.NewJob(importRow{1}, queue.OnQueue("b"))
		if err != nil {
			t.Fatal(err)
		}
		id, err := queue.DispatchBatch(ctx, q, queue.Batch{Jobs: []queue.Job{j}})
		if err != nil {
			t.Fatalf("DispatchBatch: %v", err)
		}
		return id
	}
	running := push() // never finished
	const n = 2600    // past the compaction of the batch list at half cleared
	ids := make([]string, n)
	for i := range ids {
		ids[i] = push()
		jobs, err := q.Reserve(ctx, []string{"b"}, 1, time.Minute)
		if err != nil || len(jobs) != 1 {
			t.Fatalf("Reserve = %d jobs, %v", len(jobs), err)
		}
		if jobs[0].Meta[queue.MetaBatch] == running {
			// The running batch's member came first: put it back unfinished.
			if err := testutil.Nack(ctx, q, jobs[0].Lease(), time.Now().Add(time.Hour), "later"); err != nil {
				t.Fatal(err)
			}
			if jobs, err = q.Reserve(ctx, []string{"b"}, 1, time.Minute); err != nil || len(jobs) != 1 {
				t.Fatalf("Reserve = %d jobs, %v", len(jobs), err)
			}
		}
		if err := testutil.Complete(ctx, q, driver.Completion{Lease: jobs[0].Lease(), Outcome: driver.OutcomeDone, Batch: ids[i]}); err != nil {
			t.Fatalf("Complete of a member: %v", err)
		}
	}
	for _, c := range []struct {
		id   string
		kept bool
	}{{running, true}, {ids[0], false}, {ids[n-1001], false}, {ids[n-1000], true}, {ids[n-1], true}} {
		_, err := q.GetBatch(ctx, c.id)
		if c.kept && err != nil || !c.kept && !errors.Is(err, queue.ErrNotFound) {
			t.Errorf("GetBatch(%s) = %v; kept %v", c.id, err, c.kept)
		}
	}
	seen := 0
	for after := ""; ; {
		page, err := q.ListBatches(ctx, driver.BatchFilter{Limit: 100, After: after})
		if err != nil {
			t.Fatalf("ListBatches: %v", err)
		}
		seen += len(page.Batches)
		if page.Next == "" {
			break
		}
		after = page.Next
	}
	if seen != 1001 {
		t.Errorf("ListBatches listed %d batches, want 1,001 (1,000 finished and the running one)", seen)
	}
}
