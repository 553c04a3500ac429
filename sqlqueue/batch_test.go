package sqlqueue_test

import (
	"errors"
	"testing"
	"time"

	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/sqlqueue"
)

type batchJob struct{ N int }

// TestMaintainPrunesBatches checks that the maintenance pass deletes a
// batch that finished longer ago than the dead-letter retention, with its
// members' records, and keeps one that runs.
func TestMaintainPrunesBatches(t *testing.T) {
	eachDialect(t, func(t *testing.T, b backend) {
		q := newStore(t, b).queue(t, sqlqueue.WithRetention(0, time.Millisecond))
		ctx := t.Context()
		dispatch := func(queueName string) string {
			j, err := queue.NewJob(batchJob{1}, queue.OnQueue(queueName))
			if err != nil {
				t.Fatal(err)
			}
			id, err := queue.DispatchBatch(ctx, q, queue.Batch{Jobs: []queue.Job{j}})
			if err != nil {
				t.Fatalf("DispatchBatch: %v", err)
			}
			return id
		}
		finished, running := dispatch("finish"), dispatch("wait")
		jobs, err := q.Reserve(ctx, []string{"finish"}, 1, time.Minute)
		if err != nil || len(jobs) != 1 {
			t.Fatalf("Reserve = %d, %v", len(jobs), err)
		}
		if err := q.FinishMember(ctx, jobs[0].Lease(), finished, queue.OutcomeDone, ""); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond) // past the millisecond of retention
		if leader, pruned, err := q.Maintain(ctx); err != nil || !leader || pruned != 2 {
			t.Fatalf("Maintain = leader %v, pruned %d, %v; want leader, 2 rows (the batch and its member) pruned", leader, pruned, err)
		}
		if _, err := q.GetBatch(ctx, finished); !errors.Is(err, queue.ErrNotFound) {
			t.Errorf("GetBatch of a pruned batch: %v, want ErrNotFound", err)
		}
		if info, err := q.GetBatch(ctx, running); err != nil || info.Pending != 1 {
			t.Errorf("GetBatch of a running batch after pruning = %+v, %v; want it kept", info, err)
		}
		if ms, err := q.BatchMembers(ctx, running, queue.MemberFilter{}); err != nil || len(ms.Members) != 1 {
			t.Errorf("members of a running batch after pruning = %+v, %v; want its member", ms, err)
		}
	})
}
