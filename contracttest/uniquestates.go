package contracttest

import (
	"testing"
	"time"

	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// testUniqueStates checks Job.UniqueStates: a job that names finished
// states holds its unique key in them too, against every push of the key;
// only in the states it names; until it leaves them; never against its
// own revival. A state the driver declares it cannot hold
// (Caps.NoUniqueHold) must refuse the push with ErrUnsupported and store
// nothing.
func (s *suite) testUniqueStates(t *testing.T) {
	held := func(queueName string, states ...driver.JobState) queue.Job {
		j := newJob(queueName)
		j.UniqueKey, j.UniqueStates = "k", states
		return j
	}
	// skipUnheld skips a check of st the driver cannot hold, after
	// checking that it refuses such a push.
	skipUnheld := func(t *testing.T, q queue.Queue, st driver.JobState) {
		t.Helper()
		why, ok := s.h.Caps.NoUniqueHold[st]
		if !ok {
			return
		}
		wantErr(t, "a push naming "+string(st), q.Push(t.Context(), held("us", st)), queue.ErrUnsupported)
		wantLen(t, q, "us", 0)
		t.Skip(why)
	}
	// dup fails unless pushing j is refused as a duplicate.
	dup := func(t *testing.T, q queue.Queue, what string, j queue.Job) {
		t.Helper()
		wantErr(t, what, q.Push(t.Context(), j), queue.ErrDuplicate)
	}
	plain := func() queue.Job { return held("us") }

	s.check(t, "Invalid", func(t *testing.T, q queue.Queue) {
		j := newJob("us")
		j.UniqueStates = []driver.JobState{queue.StateDead}
		wantErr(t, "states without a key", q.Push(t.Context(), j), queue.ErrInvalid)
		wantErr(t, "an active state", q.Push(t.Context(), held("us", queue.StateRunning)), queue.ErrInvalid)
		wantErr(t, "an unknown state", q.Push(t.Context(), held("us", "gone")), queue.ErrInvalid)
		wantLen(t, q, "us", 0)
	})

	s.check(t, "HeldWhileDead", func(t *testing.T, q queue.Queue) {
		skipUnheld(t, q, queue.StateDead)
		first := held("us", queue.StateDead)
		push(t, q, first)
		fail(t, q, reserveOne(t, q, "us", first.ID, longLease), "boom")
		dup(t, q, "a plain push of a key a dead letter holds", plain())
		dup(t, q, "a push naming dead", held("us", queue.StateDead))
		push(t, q, held("us-other", queue.StateDead)) // another queue's key space
		// Its own revival is no duplicate: RetryDead, then dead again.
		if err := q.RetryDead(t.Context(), first.ID); err != nil {
			t.Fatalf("RetryDead of the holder: %v", err)
		}
		fail(t, q, reserveOne(t, q, "us", first.ID, longLease), "boom again")
		// Pushing its ID again revives it in place.
		again := first
		again.Payload = []byte(`{"again":true}`)
		push(t, q, again)
		fail(t, q, reserveOne(t, q, "us", first.ID, longLease), "and again")
		// Forgotten, it holds nothing.
		if err := q.ForgetDead(t.Context(), first.ID); err != nil {
			t.Fatalf("ForgetDead: %v", err)
		}
		next := plain()
		push(t, q, next)
		reserveOne(t, q, "us", next.ID, longLease)
	})

	s.check(t, "RetryRefusedWhileHeld", func(t *testing.T, q queue.Queue) {
		skipUnheld(t, q, queue.StateDead)
		// x dies without states and holds nothing; y takes the key and
		// dies holding it; x's retry is then a duplicate of y.
		x := plain()
		push(t, q, x)
		fail(t, q, reserveOne(t, q, "us", x.ID, longLease), "boom")
		y := held("us", queue.StateDead)
		push(t, q, y)
		fail(t, q, reserveOne(t, q, "us", y.ID, longLease), "boom")
		wantErr(t, "RetryDead of a dead letter whose key another holds", q.RetryDead(t.Context(), x.ID), queue.ErrDuplicate)
		if dl := deadLetters(t, q, "us", 10); len(dl) != 2 {
			t.Fatalf("dead letters %v, want both still there", ids(dl))
		}
	})

	s.check(t, "OnlyNamedStates", func(t *testing.T, q queue.Queue) {
		skipUnheld(t, q, queue.StateDead)
		// A job holding in dead frees its key when it is done, and one
		// holding in done frees it when it dies.
		a := held("us", queue.StateDead)
		push(t, q, a)
		ack(t, q, reserveOne(t, q, "us", a.ID, longLease))
		b := held("us", queue.StateDone)
		push(t, q, b)
		fail(t, q, reserveOne(t, q, "us", b.ID, longLease), "boom")
		c := plain()
		push(t, q, c)
		reserveOne(t, q, "us", c.ID, longLease)
	})

	s.check(t, "HeldWhileDone", func(t *testing.T, q queue.Queue) {
		if s.h.Caps.NoDoneRetention != "" {
			t.Skip(s.h.Caps.NoDoneRetention)
		}
		skipUnheld(t, q, queue.StateDone)
		first := held("us", queue.StateDone)
		push(t, q, first)
		ack(t, q, reserveOne(t, q, "us", first.ID, longLease))
		dup(t, q, "a plain push of a key a kept done job holds", plain())
		dup(t, q, "a push naming done", held("us", queue.StateDone))
		later := plain()
		later.AvailableAt = time.Now().Add(time.Hour)
		dup(t, q, "a scheduled push", later)
		wantLen(t, q, "us", 0)
	})

	s.check(t, "HeldWhileCancelled", func(t *testing.T, q queue.Queue) {
		if s.h.Caps.NoDoneRetention != "" {
			t.Skip(s.h.Caps.NoDoneRetention)
		}
		c, ok := q.(driver.Controller)
		if !ok {
			t.Skip("the driver is no driver.Controller: no cancel")
		}
		skipUnheld(t, q, queue.StateCancelled)
		first := held("us", queue.StateCancelled)
		first.AvailableAt = time.Now().Add(time.Hour)
		push(t, q, first)
		if _, err := c.Cancel(t.Context(), first.ID); err != nil {
			t.Fatalf("Cancel: %v", err)
		}
		dup(t, q, "a plain push of a key a cancelled job holds", plain())
		// A cancelled job without the state holds nothing.
		other := plain()
		other.UniqueKey = "k2"
		push(t, q, other)
		if _, err := c.Cancel(t.Context(), other.ID); err != nil {
			t.Fatalf("Cancel: %v", err)
		}
		again := plain()
		again.UniqueKey = "k2"
		push(t, q, again)
	})

	s.check(t, "BatchPush", func(t *testing.T, q queue.Queue) {
		skipUnheld(t, q, queue.StateDead)
		// PushMany mixes jobs with and without states, in order.
		js := []queue.Job{plain(), held("us", queue.StateDead), held("us", queue.StateDead)}
		js[0].UniqueKey = "a"
		js[1].UniqueKey = "b"
		js[2].UniqueKey = "b" // a repeat of the batch: skipped
		stored, err := q.PushMany(t.Context(), js)
		if err != nil {
			t.Fatalf("PushMany: %v", err)
		}
		if !stored[0] || !stored[1] || stored[2] {
			t.Fatalf("PushMany stored %v, want [true true false]", stored)
		}
		got := reserve(t, q, []string{"us"}, 10, longLease)
		if len(got) != 2 || got[0].ID != js[0].ID || got[1].ID != js[1].ID {
			t.Fatalf("Reserve returned %v, want %s then %s (push order)", ids(got), js[0].ID, js[1].ID)
		}
		ack(t, q, got[0])
		fail(t, q, got[1], "boom")
		again := plain()
		again.UniqueKey = "b"
		dup(t, q, "a push of the key the batch's dead letter holds", again)
		free := plain()
		free.UniqueKey = "a"
		push(t, q, free)
	})
}
