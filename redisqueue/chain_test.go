package redisqueue_test

import (
	"testing"

	"github.com/meridianjobs/meridian/internal/testutil"
	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// completeStep reserves the one job of queue from on q and completes it
// done with next as its push, as a Worker finishing a chain step does.
func completeStep(t *testing.T, q queue.Queue, from string, next queue.Job) {
	t.Helper()
	step := reserveAll(t, q, from, 1)[0]
	if err := testutil.Complete(t.Context(), q, driver.Completion{Lease: step.Lease(), Outcome: driver.OutcomeDone, Push: []queue.Job{next}}); err != nil {
		t.Fatalf("Complete of the step: %v (the outcome is recorded: the push is left to others)", err)
	}
}

// TestChainStepResume kills the two steps by which a chain step's next
// job reaches another queue (chain.go) between them, checks what a reader
// sees in between (docs/drivers.md), and that another process stores the
// next job, once.
func TestChainStepResume(t *testing.T) {
	t.Parallel()
	t.Run("BetweenOutcomeAndPush", func(t *testing.T) {
		t.Parallel()
		killed, peer := protoSetup(t, "member-noted")
		if err := killed.Push(t.Context(), queue.Job{Queue: "c1", Name: "step"}); err != nil {
			t.Fatal(err)
		}
		completeStep(t, killed, "c1", queue.Job{ID: driver.NewID(), Queue: "c2", Name: "step"})
		// In between: the step is done and gone, the next is not stored.
		for _, name := range []string{"c1", "c2"} {
			if n, _ := peer.Len(t.Context(), name); n != 0 {
				t.Errorf("Len(%s) = %d in between, want 0", name, n)
			}
		}
		if n := outbox(t, peer, "c1"); n != 1 {
			t.Errorf("the outbox holds %d notes in between, want 1", n)
		}
		reserveAll(t, peer, "c1", 0) // the sweep stores the next step
		next := reserveAll(t, peer, "c2", 1)[0]
		if err := testutil.Ack(t.Context(), peer, next.Lease()); err != nil {
			t.Fatal(err)
		}
		reserveAll(t, peer, "c1", 0) // a second sweep stores nothing
		reserveAll(t, peer, "c2", 0)
		if n := outbox(t, peer, "c1"); n != 0 {
			t.Errorf("the outbox holds %d notes after the sweep, want 0", n)
		}
	})
	t.Run("BetweenPushAndNoteDeleted", func(t *testing.T) {
		t.Parallel()
		killed, peer := protoSetup(t, "push-stored")
		if err := killed.Push(t.Context(), queue.Job{Queue: "c1", Name: "step"}); err != nil {
			t.Fatal(err)
		}
		completeStep(t, killed, "c1", queue.Job{ID: driver.NewID(), Queue: "c2", Name: "step"})
		// In between: the next step is stored and its note kept. It runs
		// and is gone before the retry: a push without its guard would
		// store it again.
		if n := outbox(t, peer, "c1"); n != 1 {
			t.Errorf("the outbox holds %d notes in between, want 1", n)
		}
		next := reserveAll(t, peer, "c2", 1)[0]
		if err := testutil.Ack(t.Context(), peer, next.Lease()); err != nil {
			t.Fatal(err)
		}
		reserveAll(t, peer, "c1", 0)
		reserveAll(t, peer, "c2", 0)
		if n := outbox(t, peer, "c1"); n != 0 {
			t.Errorf("the outbox holds %d notes after the sweep, want 0", n)
		}
	})
	t.Run("SameQueueInScript", func(t *testing.T) {
		t.Parallel()
		// A next step in the step's own queue (one slot) is stored by the
		// completing script itself: nothing is left to a later step.
		killed, peer := protoSetup(t, "member-noted")
		if err := killed.Push(t.Context(), queue.Job{Queue: "c1", Name: "step"}); err != nil {
			t.Fatal(err)
		}
		completeStep(t, killed, "c1", queue.Job{ID: driver.NewID(), Queue: "c1", Name: "step"})
		if n := outbox(t, peer, "c1"); n != 0 {
			t.Errorf("the outbox holds %d notes, want 0", n)
		}
		if n, _ := peer.Len(t.Context(), "c1"); n != 1 {
			t.Errorf("Len(c1) = %d after the step, want the next step", n)
		}
	})
}
