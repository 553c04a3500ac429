package redisqueue_test

import (
	"errors"
	"testing"
	"time"

	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
	"github.com/meridianjobs/meridian/redisqueue"
)

// TestUniqueHoldEnds checks how a Redis dead letter's hold on its unique
// key (UniqueStates naming dead) ends, beyond what the conformance suite
// checks: FlushDead frees it; the dead letter's ID pushed again without
// the key frees it (the revived job no longer holds it); a job naming
// done or cancelled holds nothing once finished (the store deletes such
// jobs).
func TestUniqueHoldEnds(t *testing.T) {
	t.Parallel()
	rdb := client(t)
	held := func(queueName string, states ...driver.JobState) queue.Job {
		return queue.Job{ID: driver.NewID(), Queue: queueName, Name: "u", Payload: []byte(`{}`), UniqueKey: "k", UniqueStates: states}
	}
	// dies reserves j (the only job of its queue) and fails it.
	dies := func(t *testing.T, q *redisqueue.Queue, j queue.Job) {
		t.Helper()
		got, err := q.Reserve(t.Context(), []string{j.Queue}, 1, time.Minute)
		if err != nil || len(got) != 1 || got[0].ID != j.ID {
			t.Fatalf("Reserve = %d jobs, %v; want %s", len(got), err, j.ID)
		}
		complete(t, q, driver.Completion{Lease: got[0].Lease(), Outcome: driver.OutcomeFailed, Reason: "boom"})
	}
	for _, tc := range []struct {
		name string
		end  func(t *testing.T, q *redisqueue.Queue, dead queue.Job)
	}{
		{"FlushDead", func(t *testing.T, q *redisqueue.Queue, _ queue.Job) {
			if n, err := q.FlushDead(t.Context(), "a"); err != nil || n != 1 {
				t.Fatalf("FlushDead = %d, %v; want 1", n, err)
			}
		}},
		{"RevivedWithoutKey", func(t *testing.T, q *redisqueue.Queue, dead queue.Job) {
			dead.UniqueKey, dead.UniqueStates = "", nil
			if err := q.Push(t.Context(), dead); err != nil {
				t.Fatalf("pushing the dead letter's ID without its key: %v", err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			q := newQueue(t, rdb, prefix(t, rdb))
			first := held("a", queue.StateDead)
			if err := q.Push(t.Context(), first); err != nil {
				t.Fatal(err)
			}
			dies(t, q, first)
			if err := q.Push(t.Context(), held("a")); !errors.Is(err, queue.ErrDuplicate) {
				t.Fatalf("a push while the dead letter holds the key = %v, want ErrDuplicate", err)
			}
			tc.end(t, q, first)
			if err := q.Push(t.Context(), held("a")); err != nil {
				t.Fatalf("a push once the hold ended = %v, want it stored", err)
			}
		})
	}
	t.Run("DoneHoldsNothing", func(t *testing.T) {
		t.Parallel()
		q := newQueue(t, rdb, prefix(t, rdb))
		first := held("a", queue.StateDone, queue.StateCancelled)
		if err := q.Push(t.Context(), first); err != nil {
			t.Fatal(err)
		}
		got, err := q.Reserve(t.Context(), []string{"a"}, 1, time.Minute)
		if err != nil || len(got) != 1 {
			t.Fatalf("Reserve = %d jobs, %v", len(got), err)
		}
		complete(t, q, driver.Completion{Lease: got[0].Lease(), Outcome: driver.OutcomeDone})
		if err := q.Push(t.Context(), held("a")); err != nil {
			t.Fatalf("a push after the done job was deleted = %v, want it stored", err)
		}
	})
}

// complete records one outcome and fails t unless it was recorded.
func complete(t *testing.T, q *redisqueue.Queue, c driver.Completion) {
	t.Helper()
	if _, errs, err := q.Complete(t.Context(), nil, []driver.Completion{c}); err != nil || errs[0] != nil {
		t.Fatalf("Complete(%s) = %v, %v", c.Outcome, errs, err)
	}
}
