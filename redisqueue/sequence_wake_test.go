package redisqueue_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
	"github.com/meridianjobs/meridian/redisqueue"
)

// seqWake is a sequence member of TestSequencePromotionWakes.
type seqWake struct{ N int }

// TestSequencePromotionWakes checks that each way of ending a sequence's
// head outside an ack (cancel, bulk cancel, ForgetDead, bulk forget,
// FlushDead, ReleaseSequence) wakes a Worker waiting on the queue for the
// next member: the Worker polls once an hour, so member 1 runs within the
// deadline only if the script that made it ready published the queue.
// The head, member 0, either waits an hour (scheduled) or is a dead letter
// that holds the sequence, so the Worker is blocked in its Wait, with
// nothing due, when the head ends.
func TestSequencePromotionWakes(t *testing.T) {
	t.Parallel()
	rdb := client(t)
	for _, tc := range []struct {
		name string
		dead bool // the head is a dead letter that holds; else scheduled in an hour
		end  func(ctx context.Context, q *redisqueue.Queue, head string) error
	}{
		{"Cancel", false, func(ctx context.Context, q *redisqueue.Queue, head string) error {
			_, err := q.Cancel(ctx, head)
			return err
		}},
		{"BulkCancel", false, func(ctx context.Context, q *redisqueue.Queue, _ string) error {
			return bulk(ctx, q, driver.StateScheduled, driver.BulkCancel)
		}},
		{"ForgetDead", true, func(ctx context.Context, q *redisqueue.Queue, head string) error {
			return q.ForgetDead(ctx, head)
		}},
		{"BulkForget", true, func(ctx context.Context, q *redisqueue.Queue, _ string) error {
			return bulk(ctx, q, driver.StateDead, driver.BulkForget)
		}},
		{"FlushDead", true, func(ctx context.Context, q *redisqueue.Queue, _ string) error {
			_, err := q.FlushDead(ctx, "sw")
			return err
		}},
		{"ReleaseSequence", true, func(ctx context.Context, q *redisqueue.Queue, _ string) error {
			return q.ReleaseSequence(ctx, "sw", "k")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			q := newQueue(t, rdb, prefix(t, rdb))
			ctx := t.Context()
			opts := []queue.Option{queue.OnQueue("sw"), queue.Sequence("k")}
			head := queue.Delay(time.Hour)
			if tc.dead {
				head = queue.MaxAttempts(1)
			}
			if err := queue.Dispatch(ctx, q, seqWake{0}, append(opts, head)...); err != nil {
				t.Fatal(err)
			}
			if err := queue.Dispatch(ctx, q, seqWake{1}, opts...); err != nil {
				t.Fatal(err)
			}
			var headID string
			if tc.dead {
				jobs, err := q.Reserve(ctx, []string{"sw"}, 10, time.Minute)
				if err != nil || len(jobs) != 1 {
					t.Fatalf("Reserve = %d jobs, %v; want the head only", len(jobs), err)
				}
				headID = jobs[0].ID
				complete(t, q, driver.Completion{Lease: jobs[0].Lease(), Outcome: driver.OutcomeFailed, Sequence: "k"})
			} else {
				page, err := q.ListJobs(ctx, driver.JobFilter{State: driver.StateScheduled, Queue: "sw"})
				if err != nil || len(page.Jobs) != 1 {
					t.Fatalf("ListJobs(scheduled) = %d jobs, %v; want the head", len(page.Jobs), err)
				}
				headID = page.Jobs[0].ID
			}
			blocked := make(chan struct{}, 1)
			redisqueue.SetWaitBlocked(q, func() {
				select {
				case blocked <- struct{}{}:
				default:
				}
			})
			ran := make(chan int, 2)
			w := queue.NewWorker(q).Queues("sw").Poll(time.Hour).Slog(slog.New(slog.DiscardHandler))
			queue.Handle(w, func(_ context.Context, s seqWake) error { ran <- s.N; return nil })
			wctx, cancel := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() { done <- w.Run(wctx) }()
			defer func() {
				cancel()
				if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
					t.Errorf("Worker.Run: %v", err)
				}
			}()
			// The Worker found nothing to run and nothing due: it blocks
			// for an hour.
			select {
			case <-blocked:
			case <-time.After(30 * time.Second):
				t.Fatal("the Worker did not block in its Wait within 30s")
			}
			if err := tc.end(ctx, q, headID); err != nil {
				t.Fatalf("ending the head: %v", err)
			}
			select {
			case n := <-ran:
				if n != 1 {
					t.Fatalf("ran member %d, want 1", n)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("member 1 did not run within 30s under an hour's poll: its promotion woke no one")
			}
		})
	}
}

// bulk applies a to every job of queue sw in state st.
func bulk(ctx context.Context, q *redisqueue.Queue, st driver.JobState, a driver.BulkAction) error {
	n, err := q.ActOn(ctx, driver.JobFilter{State: st, Queue: "sw"}, a, 10, driver.Action{})
	if err == nil && n != 1 {
		err = errors.New("the bulk action changed no job")
	}
	return err
}
