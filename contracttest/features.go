package contracttest

import (
	"bytes"
	"context"
	"errors"
	"maps"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// testLeaser checks driver.Scheduler: one holder at a time, renewal, release,
// and takeover after expiry, also across handles.
func (s *suite) testLeaser(t *testing.T) {
	acquire := func(t *testing.T, l driver.Scheduler, name, holder string, ttl time.Duration) bool {
		t.Helper()
		ok, err := l.AcquireLease(t.Context(), name, holder, ttl)
		if err != nil {
			t.Fatalf("AcquireLease(%s, %s): %v", name, holder, err)
		}
		return ok
	}
	checkAs(s, t, "OneHolder", func(t *testing.T, q queue.Queue, l driver.Scheduler) {
		if !acquire(t, l, "lead", "a", longLease) {
			t.Fatal("the first holder did not get a free lease")
		}
		if acquire(t, l, "lead", "b", longLease) {
			t.Fatal("a second holder took a lease that was held")
		}
		if !acquire(t, l, "lead", "a", longLease) {
			t.Fatal("the holder could not renew its lease")
		}
		if !acquire(t, l, "other", "b", longLease) {
			t.Fatal("leases of other names are not independent")
		}
		if err := l.ReleaseLease(t.Context(), "lead", "b"); err != nil {
			t.Fatalf("ReleaseLease by a non-holder: %v", err)
		}
		if acquire(t, l, "lead", "b", longLease) {
			t.Fatal("a release by a non-holder freed the lease")
		}
		if err := l.ReleaseLease(t.Context(), "lead", "a"); err != nil {
			t.Fatalf("ReleaseLease: %v", err)
		}
		if !acquire(t, l, "lead", "b", longLease) {
			t.Fatal("a released lease could not be taken")
		}
	})
	checkAs(s, t, "Expiry", func(t *testing.T, q queue.Queue, l driver.Scheduler) {
		if !acquire(t, l, "lead", "a", shortLease) {
			t.Fatal("the first holder did not get a free lease")
		}
		if acquire(t, l, "lead", "b", shortLease) {
			t.Fatal("the lease was taken before it expired")
		}
		eventually(t, "the expired lease to be taken", func() bool { return acquire(t, l, "lead", "b", longLease) })
		if acquire(t, l, "lead", "a", longLease) {
			t.Fatal("the old holder renewed a lease another took")
		}
	})
	epoch := func(t *testing.T, l driver.Scheduler, name, holder string, ttl time.Duration) (int64, bool) {
		t.Helper()
		e, ok, err := l.AcquireLeaseEpoch(t.Context(), name, holder, ttl)
		if err != nil {
			t.Fatalf("AcquireLeaseEpoch(%s, %s): %v", name, holder, err)
		}
		if ok != (e > 0) {
			t.Fatalf("AcquireLeaseEpoch(%s, %s) = %d, %v: want an epoch above 0 exactly when held", name, holder, e, ok)
		}
		return e, ok
	}
	checkAs(s, t, "EpochGrows", func(t *testing.T, q queue.Queue, l driver.Scheduler) {
		// The epoch stays while the holder renews and grows at each
		// change of holder: taken after expiry, after release, by the
		// same holder after its own lease expired.
		e1, _ := epoch(t, l, "lead", "a", shortLease)
		if e, ok := epoch(t, l, "lead", "a", shortLease); !ok || e != e1 {
			t.Fatalf("a renewal moved the epoch from %d to %d (held %v)", e1, e, ok)
		}
		if _, ok := epoch(t, l, "lead", "b", longLease); ok {
			t.Fatal("a second holder took a lease that was held")
		}
		var e2 int64
		eventually(t, "the expired lease to be taken", func() bool {
			var ok bool
			e2, ok = epoch(t, l, "lead", "b", shortLease)
			return ok
		})
		taken := time.Now()
		if e2 <= e1 {
			t.Fatalf("the epoch after a takeover is %d, want above %d", e2, e1)
		}
		eventually(t, "b's lease to expire", func() bool { return time.Since(taken) > shortLease })
		e3, _ := epoch(t, l, "lead", "b", longLease)
		if e3 <= e2 {
			t.Fatalf("the epoch after the holder's own lease expired is %d, want above %d", e3, e2)
		}
		if err := l.ReleaseLease(t.Context(), "lead", "b"); err != nil {
			t.Fatalf("ReleaseLease: %v", err)
		}
		if e4, _ := epoch(t, l, "lead", "b", longLease); e4 <= e3 {
			t.Fatalf("the epoch after a release is %d, want above %d", e4, e3)
		}
		if ok := acquire(t, l, "lead", "c", longLease); ok {
			t.Fatal("AcquireLease took a lease AcquireLeaseEpoch holds")
		}
		if e, _ := epoch(t, l, "other", "a", longLease); e <= 0 {
			t.Fatalf("a new lease's epoch is %d, want above 0", e)
		}
	})
	checkAs(s, t, "StaleEpochRefused", func(t *testing.T, q queue.Queue, l driver.Scheduler) {
		// A periodic tick claimed under a Fence is refused once the
		// lease has a newer epoch, and nothing of it is stored.
		ps := l
		old, _ := epoch(t, l, "ticker", "a", shortLease)
		tick := time.Now().Truncate(time.Second)
		p := driver.PeriodicInfo{Name: "fenced", Schedule: "every 1s", LastTick: tick.Add(-time.Second), NextTick: tick}
		if _, err := ps.RegisterPeriodic(t.Context(), p); err != nil {
			t.Fatal(err)
		}
		p.LastTick, p.NextTick = tick, tick.Add(time.Second)
		current := driver.WithFence(t.Context(), driver.Fence{Lease: "ticker", Epoch: old})
		if claimed, err := ps.ClaimTick(current, p, newJob("fenced")); err != nil || !claimed {
			t.Fatalf("ClaimTick under the current epoch = %v, %v; want claimed", claimed, err)
		}
		var newer int64
		eventually(t, "the expired lease to be taken", func() bool {
			var ok bool
			newer, ok = epoch(t, l, "ticker", "b", longLease)
			return ok
		})
		p.LastTick, p.NextTick = tick.Add(time.Second), tick.Add(2*time.Second)
		stale := newJob("fenced")
		if claimed, err := ps.ClaimTick(current, p, stale); !errors.Is(err, queue.ErrFenced) || claimed {
			t.Fatalf("ClaimTick under the stale epoch %d (lease at %d) = %v, %v; want ErrFenced", old, newer, claimed, err)
		}
		if in := inspector(q); in != nil {
			if _, err := in.GetJob(t.Context(), stale.ID); !errors.Is(err, queue.ErrNotFound) {
				t.Fatalf("GetJob of a refused tick's job = %v, want ErrNotFound", err)
			}
		}
		recs, err := ps.Periodics(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			if r.Name == p.Name && !r.LastTick.Equal(tick) {
				t.Fatalf("a refused tick moved LastTick to %s, want %s", r.LastTick, tick)
			}
		}
		fresh := driver.WithFence(t.Context(), driver.Fence{Lease: "ticker", Epoch: newer})
		if claimed, err := ps.ClaimTick(fresh, p, newJob("fenced")); err != nil || !claimed {
			t.Fatalf("ClaimTick under the new epoch = %v, %v; want claimed", claimed, err)
		}
	})
	if s.h.Peer != nil {
		checkAs(s, t, "Peers", func(t *testing.T, q queue.Queue, l driver.Scheduler) {
			handles := []driver.Scheduler{l, scheduler(s.h.Peer(t, q)), scheduler(s.h.Peer(t, q))}
			var won atomic.Int32
			var wg sync.WaitGroup
			for i, h := range handles {
				wg.Go(func() {
					ok, err := h.AcquireLease(t.Context(), "lead", string(rune('a'+i)), longLease)
					if err != nil {
						t.Errorf("AcquireLease: %v", err)
					}
					if ok {
						won.Add(1)
					}
				})
			}
			wg.Wait()
			if won.Load() != 1 {
				t.Fatalf("%d handles hold the lease at once, want 1", won.Load())
			}
		})
	}
}

// testCanceller checks driver.Controller.
func (s *suite) testCanceller(t *testing.T) {
	checkAs(s, t, "Waiting", func(t *testing.T, q queue.Queue, c driver.Controller) {
		ready := newJob("cancel")
		ready.UniqueKey = "k"
		scheduled := newJob("cancel")
		scheduled.AvailableAt = time.Now().Add(time.Hour)
		push(t, q, ready)
		push(t, q, scheduled)
		for _, tc := range []struct {
			j    queue.Job
			want driver.JobState
		}{{ready, queue.StateReady}, {scheduled, queue.StateScheduled}} {
			was, err := c.Cancel(t.Context(), tc.j.ID)
			if err != nil || was != tc.want {
				t.Fatalf("Cancel(%s) = %q, %v; want %q, nil", tc.want, was, err, tc.want)
			}
		}
		expectNone(t, q, "cancel")
		wantLen(t, q, "cancel", 0)
		// The unique key is free again.
		again := newJob("cancel")
		again.UniqueKey = "k"
		push(t, q, again)
		_, err := c.Cancel(t.Context(), ready.ID)
		if s.h.Caps.NoDoneRetention != "" {
			wantErr(t, "Cancel of a cancelled job (no retention)", err, queue.ErrNotFound)
		} else {
			wantErr(t, "Cancel of a cancelled job", err, queue.ErrFinished)
		}
		_, err = c.Cancel(t.Context(), "no-such-job")
		wantErr(t, "Cancel of an unknown ID", err, queue.ErrNotFound)
		if in := inspector(q); in != nil && s.h.Caps.NoDoneRetention == "" {
			ji, err := in.GetJob(t.Context(), scheduled.ID)
			if err != nil || ji.State != queue.StateCancelled {
				t.Fatalf("GetJob of a cancelled job = %q, %v; want cancelled", ji.State, err)
			}
			page, err := in.ListJobs(t.Context(), driver.JobFilter{State: queue.StateCancelled, Queue: "cancel"})
			if err != nil || len(page.Jobs) != 2 {
				t.Fatalf("ListJobs(cancelled) = %d jobs, %v; want 2", len(page.Jobs), err)
			}
		}
	})
	checkAs(s, t, "Retrying", func(t *testing.T, q queue.Queue, c driver.Controller) {
		j := newJob("cancel")
		push(t, q, j)
		r := reserveOne(t, q, "cancel", j.ID, longLease)
		nack(t, q, r, time.Now().Add(time.Hour), "boom")
		if was, err := c.Cancel(t.Context(), j.ID); err != nil || was != queue.StateScheduled {
			t.Fatalf("Cancel of a job waiting to retry = %q, %v; want scheduled", was, err)
		}
		wantLen(t, q, "cancel", 0)
	})
	checkAs(s, t, "Running", func(t *testing.T, q queue.Queue, c driver.Controller) {
		j := newJob("cancel")
		j.UniqueKey = "k"
		push(t, q, j)
		before := time.Now().Add(-time.Second)
		r := reserveOne(t, q, "cancel", j.ID, longLease)
		if was, err := c.Cancel(t.Context(), j.ID); err != nil || was != queue.StateRunning {
			t.Fatalf("Cancel of a running job = %q, %v; want running", was, err)
		}
		wantErr(t, "Ack after the job was cancelled", ackLease(t.Context(), q, r.Lease()), queue.ErrLeaseLost)
		wantErr(t, "Nack after the job was cancelled", nackLease(t.Context(), q, r.Lease(), time.Now(), "x"), queue.ErrLeaseLost)
		leases, err := c.CancelledSince(t.Context(), before)
		if err != nil {
			t.Fatalf("CancelledSince: %v", err)
		}
		found := false
		for _, l := range leases {
			found = found || l == r.Lease()
		}
		if !found {
			t.Fatalf("CancelledSince = %v; want it to hold the running job's lease %v", leases, r.Lease())
		}
		wantLen(t, q, "cancel", 0)
		again := newJob("cancel")
		again.UniqueKey = "k"
		push(t, q, again)
	})
	checkAs(s, t, "RunningInSeveralQueues", func(t *testing.T, q queue.Queue, c driver.Controller) {
		before := time.Now().Add(-time.Second)
		want := map[driver.Lease]bool{}
		for _, name := range []string{"cancel-a", "cancel-b", "cancel-c"} {
			j := newJob(name)
			push(t, q, j)
			r := reserveOne(t, q, name, j.ID, longLease)
			if name == "cancel-c" {
				continue // running, not cancelled
			}
			if _, err := c.Cancel(t.Context(), j.ID); err != nil {
				t.Fatalf("Cancel of a running job: %v", err)
			}
			want[r.Lease()] = true
		}
		leases, err := c.CancelledSince(t.Context(), before)
		if err != nil {
			t.Fatalf("CancelledSince: %v", err)
		}
		got := map[driver.Lease]bool{}
		for _, l := range leases {
			got[l] = true
		}
		if len(got) != len(want) || !maps.Equal(got, want) {
			t.Fatalf("CancelledSince = %v; want the leases of the two cancelled jobs %v", leases, want)
		}
		if leases, err := c.CancelledSince(t.Context(), time.Now().Add(time.Hour)); err != nil || len(leases) != 0 {
			t.Fatalf("CancelledSince(an hour ahead) = %v, %v; want none", leases, err)
		}
	})
	checkAs(s, t, "DeadIsFinished", func(t *testing.T, q queue.Queue, c driver.Controller) {
		d := killJob(t, q, "cancel", "boom")
		_, err := c.Cancel(t.Context(), d.ID)
		wantErr(t, "Cancel of a dead letter", err, queue.ErrFinished)
	})
}

// snooze records outcome OutcomeSnoozed of the job under l through
// Complete, and returns its answer.
func snooze(ctx context.Context, q queue.Queue, l driver.Lease, at time.Time, counted bool) error {
	return completeOne(ctx, q, driver.Completion{Lease: l, Outcome: driver.OutcomeSnoozed, At: at, Counted: counted})
}

// testSnoozer checks snoozes (driver.OutcomeSnoozed).
func (s *suite) testSnoozer(t *testing.T) {
	s.check(t, "GivesAttemptBack", func(t *testing.T, q queue.Queue) {
		j := newJob("snooze")
		push(t, q, j)
		r := reserveOne(t, q, "snooze", j.ID, longLease)
		if err := snooze(t.Context(), q, r.Lease(), time.Now().Add(time.Hour), true); err != nil {
			t.Fatalf("Snooze: %v", err)
		}
		expectNone(t, q, "snooze")
		wantLen(t, q, "snooze", 1)
		wantErr(t, "Snooze with a stale lease", snooze(t.Context(), q, r.Lease(), time.Now(), true), queue.ErrLeaseLost)
		if in := inspector(q); in != nil {
			ji, err := in.GetJob(t.Context(), j.ID)
			if err != nil || ji.State != queue.StateScheduled || ji.Attempts != 0 || ji.Snoozes != 1 {
				t.Fatalf("GetJob of a snoozed job = %q attempts %d snoozes %d, %v; want scheduled 0 1", ji.State, ji.Attempts, ji.Snoozes, err)
			}
		}
	})
	s.check(t, "Uncounted", func(t *testing.T, q queue.Queue) {
		j := newJob("snooze")
		push(t, q, j)
		r := reserveOne(t, q, "snooze", j.ID, longLease)
		if err := snooze(t.Context(), q, r.Lease(), time.Time{}, false); err != nil {
			t.Fatalf("Snooze: %v", err)
		}
		r = reserveOne(t, q, "snooze", j.ID, longLease)
		if r.Attempts != 1 || r.Snoozes != 0 {
			t.Fatalf("after an uncounted snooze the job has attempts %d snoozes %d, want 1 0", r.Attempts, r.Snoozes)
		}
	})
}

// testUniqueModes checks UniqueFor and UniqueReplace, and that a push
// resets nothing it should keep.
func (s *suite) testUniqueModes(t *testing.T) {
	s.check(t, "ForHoldsAfterFinish", func(t *testing.T, q queue.Queue) {
		j := newJob("uf")
		j.UniqueKey, j.UniqueFor = "k", longLease
		push(t, q, j)
		r := reserveOne(t, q, "uf", j.ID, longLease)
		ack(t, q, r)
		again := newJob("uf")
		again.UniqueKey, again.UniqueFor = "k", longLease
		wantErr(t, "a push within UniqueFor after the holder finished", q.Push(t.Context(), again), queue.ErrDuplicate)
		plain := newJob("uf")
		plain.UniqueKey = "k"
		wantErr(t, "a plain unique push within another's UniqueFor", q.Push(t.Context(), plain), queue.ErrDuplicate)
		other := newJob("uf2")
		other.UniqueKey, other.UniqueFor = "k", longLease
		push(t, q, other) // another queue's key space
	})
	s.check(t, "ForExpires", func(t *testing.T, q queue.Queue) {
		j := newJob("uf")
		j.UniqueKey, j.UniqueFor = "k", shortLease
		push(t, q, j)
		r := reserveOne(t, q, "uf", j.ID, longLease)
		ack(t, q, r)
		eventually(t, "the UniqueFor hold to expire", func() bool {
			again := newJob("uf")
			again.UniqueKey, again.UniqueFor = "k", shortLease
			err := q.Push(t.Context(), again)
			if err != nil && !errors.Is(err, queue.ErrDuplicate) {
				t.Fatalf("Push: %v", err)
			}
			return err == nil
		})
	})
	s.check(t, "ReplaceWaiting", func(t *testing.T, q queue.Queue) {
		for _, at := range []time.Time{{}, time.Now().Add(time.Hour)} {
			first := newJob("rep")
			first.UniqueKey, first.UniqueReplace, first.AvailableAt = "k", true, at
			push(t, q, first)
			second := newJob("rep")
			second.UniqueKey, second.UniqueReplace = "k", true
			push(t, q, second)
			wantLen(t, q, "rep", 1)
			got := reserveOne(t, q, "rep", second.ID, longLease)
			if string(got.Payload) != string(second.Payload) {
				t.Fatalf("the replacing job has payload %s, want %s", got.Payload, second.Payload)
			}
			// Held by a running job: a duplicate.
			third := newJob("rep")
			third.UniqueKey, third.UniqueReplace = "k", true
			wantErr(t, "a replacing push while the holder runs", q.Push(t.Context(), third), queue.ErrDuplicate)
			ack(t, q, got)
		}
	})
	s.check(t, "PlainDoesNotReplace", func(t *testing.T, q queue.Queue) {
		first := newJob("rep")
		first.UniqueKey = "k"
		push(t, q, first)
		second := newJob("rep")
		second.UniqueKey = "k"
		wantErr(t, "a plain unique push", q.Push(t.Context(), second), queue.ErrDuplicate)
		reserveOne(t, q, "rep", first.ID, longLease)
	})
}

// testPeriodicStore checks driver.Scheduler: a tick is claimed once,
// also by racing handles, and a claimed tick is never enqueued again, also
// after its job finished.
func (s *suite) testPeriodicStore(t *testing.T) {
	checkAs(s, t, "ClaimOnce", func(t *testing.T, q queue.Queue, ps driver.Scheduler) {
		base := time.Now().Truncate(time.Second)
		last, err := ps.RegisterPeriodic(t.Context(), driver.PeriodicInfo{Name: "p", Schedule: "every 1s", LastTick: base, NextTick: base.Add(time.Second)})
		if err != nil || !last.Equal(base) {
			t.Fatalf("RegisterPeriodic = %v, %v; want %v", last, err, base)
		}
		last, err = ps.RegisterPeriodic(t.Context(), driver.PeriodicInfo{Name: "p", Schedule: "every 2s", LastTick: base.Add(time.Hour)})
		if err != nil || !last.Equal(base) {
			t.Fatalf("RegisterPeriodic of a known name = %v, %v; want its mark %v kept", last, err, base)
		}
		tick := base.Add(time.Second)
		j := newJob("per")
		if ok, err := ps.ClaimTick(t.Context(), driver.PeriodicInfo{Name: "p", Schedule: "every 1s", LastTick: tick, NextTick: tick.Add(time.Second)}, j); err != nil || !ok {
			t.Fatalf("ClaimTick = %v, %v; want true", ok, err)
		}
		r := reserveOne(t, q, "per", j.ID, longLease)
		ack(t, q, r)
		for _, at := range []time.Time{tick, base} {
			again := newJob("per")
			if ok, err := ps.ClaimTick(t.Context(), driver.PeriodicInfo{Name: "p", LastTick: at}, again); err != nil || ok {
				t.Fatalf("ClaimTick of a claimed tick = %v, %v; want false", ok, err)
			}
		}
		expectNone(t, q, "per")
		list, err := ps.Periodics(t.Context())
		if err != nil || len(list) != 1 || !list[0].LastTick.Equal(tick) || list[0].LastJobID != j.ID || list[0].Schedule != "every 1s" {
			t.Fatalf("Periodics = %+v, %v; want p at %v with job %s", list, err, tick, j.ID)
		}
	})
	checkAs(s, t, "DuplicateJobStillClaims", func(t *testing.T, q queue.Queue, ps driver.Scheduler) {
		base := time.Now().Truncate(time.Second)
		if _, err := ps.RegisterPeriodic(t.Context(), driver.PeriodicInfo{Name: "p", LastTick: base}); err != nil {
			t.Fatal(err)
		}
		holder := newJob("per")
		holder.UniqueKey = "k"
		push(t, q, holder)
		j := newJob("per")
		j.UniqueKey = "k"
		if ok, err := ps.ClaimTick(t.Context(), driver.PeriodicInfo{Name: "p", LastTick: base.Add(time.Second)}, j); err != nil || !ok {
			t.Fatalf("ClaimTick with a duplicate job = %v, %v; want true", ok, err)
		}
		wantLen(t, q, "per", 1)
	})
	checkAs(s, t, "Paused", func(t *testing.T, q queue.Queue, ps driver.Scheduler) {
		base := time.Now().Truncate(time.Second)
		tpl := []byte{'{', 0, 0xff, '}'} // not UTF-8: a template is bytes
		if _, err := ps.RegisterPeriodic(t.Context(), driver.PeriodicInfo{Name: "p", Schedule: "every 1s", LastTick: base, Template: tpl}); err != nil {
			t.Fatal(err)
		}
		wantErr(t, "PausePeriodic of an unknown name", ps.PausePeriodic(t.Context(), "nope", true), queue.ErrNotFound)
		for range 2 { // pausing a paused record is no error
			if err := ps.PausePeriodic(t.Context(), "p", true); err != nil {
				t.Fatalf("PausePeriodic: %v", err)
			}
		}
		if ok, err := ps.ClaimTick(t.Context(), driver.PeriodicInfo{Name: "p", LastTick: base.Add(time.Second)}, newJob("per")); err != nil || ok {
			t.Fatalf("ClaimTick of a paused record = %v, %v; want false", ok, err)
		}
		expectNone(t, q, "per")
		// A worker that registers the record again keeps it paused.
		if _, err := ps.RegisterPeriodic(t.Context(), driver.PeriodicInfo{Name: "p", Schedule: "every 2s", LastTick: base, Template: tpl}); err != nil {
			t.Fatal(err)
		}
		list, err := ps.Periodics(t.Context())
		if err != nil || len(list) != 1 || !list[0].Paused || !bytes.Equal(list[0].Template, tpl) || list[0].Schedule != "every 2s" {
			t.Fatalf("Periodics = %+v, %v; want p paused, schedule every 2s, template %q", list, err, tpl)
		}
		if seen := list[0].Seen; time.Since(seen) > time.Minute || time.Until(seen) > time.Minute {
			t.Errorf("Seen = %v, want about now", seen)
		}
		if err := ps.PausePeriodic(t.Context(), "p", false); err != nil {
			t.Fatal(err)
		}
		j := newJob("per")
		if ok, err := ps.ClaimTick(t.Context(), driver.PeriodicInfo{Name: "p", LastTick: base.Add(2 * time.Second)}, j); err != nil || !ok {
			t.Fatalf("ClaimTick after the resume = %v, %v; want true", ok, err)
		}
		reserveOne(t, q, "per", j.ID, longLease)
		if list, err := ps.Periodics(t.Context()); err != nil || list[0].Paused {
			t.Fatalf("Periodics after the resume = %+v, %v; want p not paused", list, err)
		}
	})
	if s.h.Peer != nil {
		checkAs(s, t, "Racing", func(t *testing.T, q queue.Queue, ps driver.Scheduler) {
			base := time.Now().Truncate(time.Second)
			if _, err := ps.RegisterPeriodic(t.Context(), driver.PeriodicInfo{Name: "p", LastTick: base}); err != nil {
				t.Fatal(err)
			}
			handles := []driver.Scheduler{ps, scheduler(s.h.Peer(t, q)), scheduler(s.h.Peer(t, q))}
			const ticks = 5
			var claimed atomic.Int32
			var wg sync.WaitGroup
			for _, h := range handles {
				wg.Go(func() {
					for i := 1; i <= ticks; i++ {
						ok, err := h.ClaimTick(t.Context(), driver.PeriodicInfo{Name: "p", LastTick: base.Add(time.Duration(i) * time.Second)}, newJob("per"))
						if err != nil {
							t.Errorf("ClaimTick: %v", err)
						}
						if ok {
							claimed.Add(1)
						}
					}
				})
			}
			wg.Wait()
			if claimed.Load() != ticks {
				t.Fatalf("%d claims of %d ticks by 3 racing handles, want exactly %d", claimed.Load(), ticks, ticks)
			}
			wantLen(t, q, "per", ticks)
		})
	}
}
