package sqlqueue_test

import (
	"errors"
	"testing"
	"time"

	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
	"github.com/meridianjobs/meridian/sqlqueue"
)

type batchJob struct{ N int }

// TestMaintainPrunesBatches checks that the maintenance pass deletes a
// batch that finished longer ago than the dead-letter retention, with its
// members' records, and keeps one that runs.
func TestMaintainPrunesBatches(t *testing.T) {
	eachDialect(t, func(t *testing.T, b backend) {
		s := newStore(t, b)
		q, db := s.open(t, sqlqueue.WithRetention(0, time.Hour))
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
		if _, errs, err := q.Complete(ctx, nil, []driver.Completion{{Lease: jobs[0].Lease(), Outcome: driver.OutcomeDone, Batch: finished}}); err != nil || errs[0] != nil {
			if err == nil {
				err = errs[0]
			}
			t.Fatal(err)
		}
		s.backdate(t, db, 2*time.Hour) // past the hour of retention
		if leader, pruned, err := q.Maintain(ctx); err != nil || !leader || pruned != 2 {
			t.Fatalf("Maintain = leader %v, pruned %d, %v; want leader, 2 rows (the batch and its member) pruned", leader, pruned, err)
		}
		if _, err := q.GetBatch(ctx, finished); !errors.Is(err, queue.ErrNotFound) {
			t.Errorf("GetBatch of a pruned batch: %v, want ErrNotFound", err)
		}
		if info, err := q.GetBatch(ctx, running); err != nil || info.Pending != 1 {
			t.Errorf("GetBatch of a running batch after pruning = %+v, %v; want it kept", info, err)
		}
		if ms, err := q.BatchMembers(ctx, running, driver.MemberFilter{}); err != nil || len(ms.Members) != 1 {
			t.Errorf("members of a running batch after pruning = %+v, %v; want its member", ms, err)
		}
	})
}

// BenchmarkFinishMember measures what a batch member's finish costs the
// worker against a plain job's single ack: per op, one Complete of a
// member's outcome (its transaction with the batch's counters) or of a
// plain job's.
// Reserving is outside the timer.
func BenchmarkFinishMember(b *testing.B) {
	for _, member := range []bool{false, true} {
		name := map[bool]string{false: "Ack", true: "FinishMember"}[member]
		b.Run(name, func(b *testing.B) {
			eachDialectB(b, func(b *testing.B, q queue.Queue) {
				ctx := b.Context()
				var held []queue.Job
				id := ""
				fill := func() {
					const n = 500
					jobs := make([]queue.Job, n)
					for i := range jobs {
						jobs[i], _ = queue.NewJob(batchJob{i})
					}
					if member {
						var err error
						if id, err = queue.DispatchBatch(ctx, q, queue.Batch{Jobs: jobs}); err != nil {
							b.Fatal(err)
						}
					} else if _, err := queue.PushMany(ctx, q, jobs); err != nil {
						b.Fatal(err)
					}
					got, err := q.Reserve(ctx, nil, n, time.Hour)
					if err != nil || len(got) != n {
						b.Fatalf("Reserve = %d, %v", len(got), err)
					}
					held = got
				}
				for b.Loop() {
					if len(held) == 0 {
						b.StopTimer()
						fill()
						b.StartTimer()
					}
					j := held[0]
					held = held[1:]
					out := driver.Completion{Lease: j.Lease(), Outcome: driver.OutcomeDone}
					if member {
						out.Batch = id
					}
					_, errs, err := q.Complete(ctx, nil, []driver.Completion{out})
					if err == nil {
						err = errs[0]
					}
					if err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}
