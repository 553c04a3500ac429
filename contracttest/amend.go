package contracttest

import (
	"bytes"
	"testing"
	"time"

	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// amend calls c.Amend and fails t on an error.
func amend(t *testing.T, c driver.Controller, id string, a driver.Amendment) driver.JobState {
	t.Helper()
	was, err := c.Amend(t.Context(), id, a)
	if err != nil {
		t.Fatalf("Amend(%s, %s): %v", id, a.Op, err)
	}
	return was
}

// wantActions checks that job id's history records the actions whose
// What are whats, in order, by "ops" (when the store inspects jobs).
func wantActions(t *testing.T, q queue.Queue, id string, whats ...string) {
	t.Helper()
	in := inspector(q)
	if in == nil {
		return
	}
	ji, err := in.GetJob(t.Context(), id)
	if err != nil {
		t.Fatalf("GetJob(%s): %v", id, err)
	}
	if len(ji.Actions) != len(whats) {
		t.Fatalf("GetJob(%s).Actions = %+v, want %q", id, ji.Actions, whats)
	}
	for i, a := range ji.Actions {
		if a.What != whats[i] || a.By != "ops" || a.At.IsZero() || time.Since(a.At) > time.Minute {
			t.Fatalf("GetJob(%s).Actions[%d] = %+v, want %q by ops, at about now", id, i, a, whats[i])
		}
	}
}

// testAmender checks Controller.Amend: a retry with an edited payload, a
// scheduled job run now, a finished job run again, and what each refuses.
func (s *suite) testAmender(t *testing.T) {
	by := func(what string) driver.Action { return driver.Action{By: "ops", What: what} }
	checkAs(s, t, "RetryEdited", func(t *testing.T, q queue.Queue, c driver.Controller) {
		d := killJob(t, q, "amend", "boom")
		edited := []byte("edited \xff not json")
		was := amend(t, c, d.ID, driver.Amendment{Op: driver.AmendRetry, Payload: edited, Action: by("edited")})
		if was != queue.StateDead {
			t.Fatalf("Amend(retry) of a dead letter: was %q, want dead", was)
		}
		wantActions(t, q, d.ID, "edited")
		if in := inspector(q); in != nil {
			ji, err := in.GetJob(t.Context(), d.ID)
			if err != nil || ji.State != queue.StateReady || !bytes.Equal(ji.Payload, edited) {
				t.Fatalf("GetJob after Amend(retry) = %q %q, %v; want ready with the edited payload", ji.State, ji.Payload, err)
			}
		}
		r := reserveOne(t, q, "amend", d.ID, longLease)
		if r.Attempts != 1 || !bytes.Equal(r.Payload, edited) {
			t.Fatalf("retried job reserved with attempts %d, payload %q; want 1, %q", r.Attempts, r.Payload, edited)
		}
		// Not finished: a retry is refused, and changes nothing.
		_, err := c.Amend(t.Context(), d.ID, driver.Amendment{Op: driver.AmendRetry, Payload: []byte("x"), Action: by("again")})
		wantErr(t, "Amend(retry) of a running job", err, driver.ErrJobState)
		wantActions(t, q, d.ID, "edited")
		_, err = c.Amend(t.Context(), "no-such-job", driver.Amendment{Op: driver.AmendRetry})
		wantErr(t, "Amend(retry) of an unknown ID", err, queue.ErrNotFound)
	})
	checkAs(s, t, "RetryKeepsPayload", func(t *testing.T, q queue.Queue, c driver.Controller) {
		d := killJob(t, q, "amend", "boom")
		amend(t, c, d.ID, driver.Amendment{Op: driver.AmendRetry, Action: by("retried")})
		if r := reserveOne(t, q, "amend", d.ID, longLease); !bytes.Equal(r.Payload, d.Payload) {
			t.Fatalf("payload after Amend(retry) without one = %q, want %q", r.Payload, d.Payload)
		}
	})
	checkAs(s, t, "RetryUniqueHeld", func(t *testing.T, q queue.Queue, c driver.Controller) {
		j := newJob("amend")
		j.UniqueKey = "amend-k"
		push(t, q, j)
		fail(t, q, reserveOne(t, q, "amend", j.ID, longLease), "boom")
		other := newJob("amend")
		other.UniqueKey = "amend-k"
		push(t, q, other)
		_, err := c.Amend(t.Context(), j.ID, driver.Amendment{Op: driver.AmendRetry, Payload: []byte("new"), Action: by("edited")})
		wantErr(t, "Amend(retry) while the unique key is held", err, queue.ErrDuplicate)
		if dl := deadLetters(t, q, "amend", 10); len(dl) != 1 || dl[0].ID != j.ID || !bytes.Equal(dl[0].Payload, j.Payload) {
			t.Fatalf("dead letters after a refused Amend = %v, want %s unchanged", ids(dl), j.ID)
		}
		wantActions(t, q, j.ID)
	})
	checkAs(s, t, "Note", func(t *testing.T, q queue.Queue, c driver.Controller) {
		j := newJob("amend")
		push(t, q, j)
		if was := amend(t, c, j.ID, driver.Amendment{Op: driver.AmendNote, Action: by("dispatched")}); was != queue.StateReady {
			t.Fatalf("Amend(note) of a ready job: was %q, want ready", was)
		}
		r := reserveOne(t, q, "amend", j.ID, longLease)
		amend(t, c, j.ID, driver.Amendment{Op: driver.AmendNote, Action: by("looked")})
		wantActions(t, q, j.ID, "dispatched", "looked")
		fail(t, q, r, "boom")
		amend(t, c, j.ID, driver.Amendment{Op: driver.AmendRetry, Action: by("retried")})
		wantActions(t, q, j.ID, "dispatched", "looked", "retried")
		if in := inspector(q); in != nil && s.h.Caps.NoAttemptHistory == "" {
			ji, err := in.GetJob(t.Context(), j.ID)
			if err != nil || len(ji.History) != 1 || ji.History[0].Error != "boom" {
				t.Fatalf("GetJob after actions: History %+v, %v; want the failed attempt kept beside the actions", ji.History, err)
			}
		}
		_, err := c.Amend(t.Context(), "no-such-job", driver.Amendment{Op: driver.AmendNote, Action: by("x")})
		wantErr(t, "Amend(note) of an unknown ID", err, queue.ErrNotFound)
	})
	checkAs(s, t, "PushRecordsActions", func(t *testing.T, q queue.Queue, c driver.Controller) {
		// A job pushed with Actions has them in its history from the
		// start (the dashboard's dispatch and clone); a duplicate push
		// records nothing on the job it collides with.
		j := newJob("amend")
		j.Actions = []driver.Action{by("dispatched"), by("cloned")}
		push(t, q, j)
		wantActions(t, q, j.ID, "dispatched", "cloned")
		again := j
		again.Actions = []driver.Action{by("again")}
		wantErr(t, "a second push of the same ID", q.Push(t.Context(), again), queue.ErrDuplicate)
		amend(t, c, j.ID, driver.Amendment{Op: driver.AmendNote, Action: by("looked")})
		wantActions(t, q, j.ID, "dispatched", "cloned", "looked")
		r := reserveOne(t, q, "amend", j.ID, longLease)
		if len(r.Actions) != 0 {
			t.Fatalf("reserved job carries Actions %+v: they are a push's input, kept in the history", r.Actions)
		}
		if bp, ok := q.(driver.BatchPusher); ok {
			a, b := newJob("amend"), newJob("amend")
			b.Actions = []driver.Action{by("dispatched")}
			stored, err := bp.PushMany(t.Context(), []queue.Job{a, b, again})
			if err != nil || len(stored) != 3 || !stored[0] || !stored[1] || stored[2] {
				t.Fatalf("PushMany(plain, with actions, duplicate) = %v, %v; want [true true false]", stored, err)
			}
			wantActions(t, q, a.ID)
			wantActions(t, q, b.ID, "dispatched")
			wantActions(t, q, j.ID, "dispatched", "cloned", "looked")
		}
	})
	checkAs(s, t, "RunNow", func(t *testing.T, q queue.Queue, c driver.Controller) {
		j := newJob("amend")
		j.AvailableAt = time.Now().Add(time.Hour)
		push(t, q, j)
		expectNone(t, q, "amend")
		if was := amend(t, c, j.ID, driver.Amendment{Op: driver.AmendRunNow, Action: by("run now")}); was != queue.StateScheduled {
			t.Fatalf("Amend(run now) of a scheduled job: was %q, want scheduled", was)
		}
		wantActions(t, q, j.ID, "run now")
		_, err := c.Amend(t.Context(), j.ID, driver.Amendment{Op: driver.AmendRunNow, Action: by("again")})
		wantErr(t, "Amend(run now) of a ready job", err, driver.ErrJobState)
		r := reserveOne(t, q, "amend", j.ID, longLease)
		if r.Attempts != 1 || !bytes.Equal(r.Payload, j.Payload) {
			t.Fatalf("job run now reserved with attempts %d, payload %q; want 1, %q", r.Attempts, r.Payload, j.Payload)
		}
		_, err = c.Amend(t.Context(), j.ID, driver.Amendment{Op: driver.AmendRunNow, Action: by("again")})
		wantErr(t, "Amend(run now) of a running job", err, driver.ErrJobState)
		wantActions(t, q, j.ID, "run now")
		_, err = c.Amend(t.Context(), "no-such-job", driver.Amendment{Op: driver.AmendRunNow})
		wantErr(t, "Amend(run now) of an unknown ID", err, queue.ErrNotFound)
	})
	checkAs(s, t, "FromState", func(t *testing.T, q queue.Queue, c driver.Controller) {
		// From names the only state a change applies to: a bulk retry of
		// dead letters must not run again a job that finished meanwhile.
		ready := newJob("amend-from")
		push(t, q, ready)
		_, err := c.Amend(t.Context(), ready.ID, driver.Amendment{Op: driver.AmendNote, Action: by("x"), From: queue.StateDead})
		wantErr(t, "Amend(note, from dead) of a ready job", err, driver.ErrJobState)
		wantActions(t, q, ready.ID)
		gone := newJob("amend")
		gone.AvailableAt = time.Now().Add(time.Hour)
		push(t, q, gone)
		if _, err := c.Cancel(t.Context(), gone.ID); err != nil {
			t.Fatalf("Cancel: %v", err)
		}
		_, err = c.Amend(t.Context(), gone.ID, driver.Amendment{Op: driver.AmendRetry, Action: by("x"), From: queue.StateDead})
		if s.h.Caps.NoDoneRetention != "" {
			wantErr(t, "Amend(retry, from dead) of a cancelled job (no retention)", err, queue.ErrNotFound)
		} else {
			wantErr(t, "Amend(retry, from dead) of a cancelled job", err, driver.ErrJobState)
			if in := inspector(q); in != nil {
				if ji, err := in.GetJob(t.Context(), gone.ID); err != nil || ji.State != queue.StateCancelled {
					t.Fatalf("GetJob after a refused Amend = %q, %v; want cancelled", ji.State, err)
				}
			}
		}
		d := killJob(t, q, "amend", "boom")
		if was := amend(t, c, d.ID, driver.Amendment{Op: driver.AmendRetry, Action: by("retried"), From: queue.StateDead}); was != queue.StateDead {
			t.Fatalf("Amend(retry, from dead) of a dead letter: was %q, want dead", was)
		}
		wantActions(t, q, d.ID, "retried")
	})
	checkAs(s, t, "RetryFinished", func(t *testing.T, q queue.Queue, c driver.Controller) {
		done := newJob("amend")
		push(t, q, done)
		ack(t, q, reserveOne(t, q, "amend", done.ID, longLease))
		gone := newJob("amend")
		gone.AvailableAt = time.Now().Add(time.Hour)
		push(t, q, gone)
		if _, err := c.Cancel(t.Context(), gone.ID); err != nil {
			t.Fatalf("Cancel: %v", err)
		}
		for _, tc := range []struct {
			j   queue.Job
			was driver.JobState
		}{{done, queue.StateDone}, {gone, queue.StateCancelled}} {
			was, err := c.Amend(t.Context(), tc.j.ID, driver.Amendment{Op: driver.AmendRetry, Action: by("cloned")})
			if s.h.Caps.NoDoneRetention != "" {
				wantErr(t, "Amend(retry) of a "+string(tc.was)+" job (no retention)", err, queue.ErrNotFound)
				continue
			}
			if err != nil || was != tc.was {
				t.Fatalf("Amend(retry) of a %s job = %q, %v; want %q, nil", tc.was, was, err, tc.was)
			}
			wantActions(t, q, tc.j.ID, "cloned")
			r := reserveOne(t, q, "amend", tc.j.ID, longLease)
			if r.Attempts != 1 || !bytes.Equal(r.Payload, tc.j.Payload) {
				t.Fatalf("%s job run again: attempts %d, payload %q; want 1, %q", tc.was, r.Attempts, r.Payload, tc.j.Payload)
			}
		}
	})
}
