package contracttest

import (
	"bytes"
	"slices"
	"testing"
	"time"

	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// killJob pushes a new job to queueName, reserves it and fails it with
// reason, returning the reserved job.
func killJob(t *testing.T, q queue.Queue, queueName, reason string) queue.Job {
	t.Helper()
	j := newJob(queueName)
	push(t, q, j)
	r := reserveOne(t, q, queueName, j.ID, longLease)
	fail(t, q, r, reason)
	return r
}

// testDeadLetters checks Fail and the dead-letter operations.
func (s *suite) testDeadLetters(t *testing.T) {
	s.check(t, "FailAndList", func(t *testing.T, q queue.Queue) {
		// Failed in the order a, c, b; listed most recent first. The pauses
		// keep the failure times apart for drivers that order by them.
		a := killJob(t, q, "dl", "a failed")
		time.Sleep(5 * s.tol)
		c := killJob(t, q, "dl-other", "c failed")
		time.Sleep(5 * s.tol)
		b := killJob(t, q, "dl", "b failed")

		wantLen(t, q, "dl", 0)
		expectNone(t, q, "dl", "dl-other")
		all := deadLetters(t, q, "", 10)
		if want := []string{b.ID, c.ID, a.ID}; !slices.Equal(ids(all), want) {
			t.Fatalf("DeadLetters(\"\") = %v, want %v (most recently failed first)", ids(all), want)
		}
		for _, d := range all {
			want := map[string]string{a.ID: "a failed", b.ID: "b failed", c.ID: "c failed"}[d.ID]
			if d.LastError != want || d.Attempts != 1 || d.Name != "contract" {
				t.Errorf("dead letter %s: LastError %q, Attempts %d, Name %q; want %q, 1, contract", d.ID, d.LastError, d.Attempts, d.Name, want)
			}
		}
		if got := deadLetters(t, q, "dl", 10); !slices.Equal(ids(got), []string{b.ID, a.ID}) {
			t.Fatalf("DeadLetters(dl) = %v, want %v", ids(got), []string{b.ID, a.ID})
		}
		if got := deadLetters(t, q, "", 1); !slices.Equal(ids(got), []string{b.ID}) {
			t.Fatalf("DeadLetters(\"\", 1) = %v, want [%s]", ids(got), b.ID)
		}
		// A limit <= 0 means the driver's largest page, which holds all three.
		for _, limit := range []int{0, -1} {
			if got := deadLetters(t, q, "", limit); !slices.Equal(ids(got), ids(all)) {
				t.Fatalf("DeadLetters(\"\", %d) = %v, want %v (the largest page)", limit, ids(got), ids(all))
			}
		}
		if got := deadLetters(t, q, "no-such-queue", 10); len(got) != 0 {
			t.Fatalf("DeadLetters(no-such-queue) = %v, want none", ids(got))
		}
	})

	s.check(t, "RetryDead", func(t *testing.T, q queue.Queue) {
		j := newJob("rd")
		j.Payload = []byte("not json \x00 at all")
		push(t, q, j)
		r := reserveOne(t, q, "rd", j.ID, longLease)
		nack(t, q, r, time.Time{}, "first")
		r = reserveOne(t, q, "rd", j.ID, longLease)
		fail(t, q, r, "second")
		if err := q.RetryDead(t.Context(), j.ID); err != nil {
			t.Fatalf("RetryDead: %v", err)
		}
		if dl := deadLetters(t, q, "rd", 10); len(dl) != 0 {
			t.Fatalf("dead letters after RetryDead: %v, want none", ids(dl))
		}
		wantLen(t, q, "rd", 1)
		r = reserveOne(t, q, "rd", j.ID, longLease)
		if r.Attempts != 1 || !bytes.Equal(r.Payload, j.Payload) {
			t.Fatalf("retried dead letter: Attempts %d, payload %q; want 1 (reset), %q", r.Attempts, r.Payload, j.Payload)
		}
		wantErr(t, "RetryDead of a running job", q.RetryDead(t.Context(), j.ID), queue.ErrNotFound)
		wantErr(t, "RetryDead of an unknown job", q.RetryDead(t.Context(), driver.NewID()), queue.ErrNotFound)
		ack(t, q, r) // RetryDead of a running job changed nothing
	})

	s.check(t, "ForgetDead", func(t *testing.T, q queue.Queue) {
		dead := killJob(t, q, "fd", "gone")
		ready := newJob("fd")
		push(t, q, ready)
		if err := q.ForgetDead(t.Context(), dead.ID); err != nil {
			t.Fatalf("ForgetDead: %v", err)
		}
		if dl := deadLetters(t, q, "", 10); len(dl) != 0 {
			t.Fatalf("dead letters after ForgetDead: %v, want none", ids(dl))
		}
		wantErr(t, "ForgetDead again", q.ForgetDead(t.Context(), dead.ID), queue.ErrNotFound)
		wantErr(t, "RetryDead of a forgotten job", q.RetryDead(t.Context(), dead.ID), queue.ErrNotFound)
		wantErr(t, "ForgetDead of a ready job", q.ForgetDead(t.Context(), ready.ID), queue.ErrNotFound)
		wantErr(t, "RetryDead of a ready job", q.RetryDead(t.Context(), ready.ID), queue.ErrNotFound)
		wantErr(t, "ForgetDead of an unknown job", q.ForgetDead(t.Context(), driver.NewID()), queue.ErrNotFound)
		r := reserveOne(t, q, "fd", ready.ID, longLease) // untouched by the calls on it
		if r.Attempts != 1 {
			t.Fatalf("Attempts = %d, want 1", r.Attempts)
		}
	})

	s.check(t, "FlushDead", func(t *testing.T, q queue.Queue) {
		killJob(t, q, "f1", "x")
		killJob(t, q, "f1", "x")
		keep := killJob(t, q, "f2", "x")
		live := newJob("f1")
		push(t, q, live)
		n, err := q.FlushDead(t.Context(), "f1")
		if err != nil || n != 2 {
			t.Fatalf("FlushDead(f1) = %d, %v; want 2, nil", n, err)
		}
		if dl := deadLetters(t, q, "", 10); !slices.Equal(ids(dl), []string{keep.ID}) {
			t.Fatalf("dead letters after FlushDead(f1): %v, want [%s]", ids(dl), keep.ID)
		}
		n, err = q.FlushDead(t.Context(), "")
		if err != nil || n != 1 {
			t.Fatalf("FlushDead(\"\") = %d, %v; want 1, nil", n, err)
		}
		n, err = q.FlushDead(t.Context(), "")
		if err != nil || n != 0 {
			t.Fatalf("FlushDead(\"\") with no dead letters = %d, %v; want 0, nil", n, err)
		}
		reserveOne(t, q, "f1", live.ID, longLease) // live jobs are not dead letters
	})

	s.check(t, "PushRevivesDeadLetter", func(t *testing.T, q queue.Queue) {
		j := newJob("rp")
		push(t, q, j)
		r := reserveOne(t, q, "rp", j.ID, longLease)
		nack(t, q, r, time.Time{}, "first")
		r = reserveOne(t, q, "rp", j.ID, longLease)
		fail(t, q, r, "second")

		// As the cookbook's requeue does: push the dead job back, here with
		// a new payload and to another queue (to its own where IDs are
		// unique per queue only).
		again := r
		again.Payload = []byte(`{"fixed":true}`)
		again.Queue = "rp-fixed"
		if s.h.Caps.IDsPerQueue != "" {
			t.Logf("revived in its own queue: %s", s.h.Caps.IDsPerQueue)
			again.Queue = "rp"
		}
		push(t, q, again)
		if dl := deadLetters(t, q, "", 10); len(dl) != 0 {
			t.Fatalf("dead letters after pushing one back: %v, want none", ids(dl))
		}
		wantLen(t, q, "", 1)
		got := reserveOne(t, q, again.Queue, j.ID, longLease)
		if got.Attempts != 1 || !bytes.Equal(got.Payload, again.Payload) {
			t.Fatalf("revived job: Attempts %d, payload %q; want 1 (reset), %q", got.Attempts, got.Payload, again.Payload)
		}
		staleCalls(t, q, r.Lease(), "with the lease of the dead attempt")
		ack(t, q, got)
	})
}
