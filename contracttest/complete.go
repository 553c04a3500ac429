package contracttest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// complete records outs through Queue.Complete and fails the test when the
// call fails as a whole or answers the wrong number of outcomes.
func complete(t *testing.T, q queue.Queue, starts []driver.Lease, outs ...driver.Completion) ([]driver.Lease, []error) {
	t.Helper()
	lost, errs, err := q.Complete(t.Context(), starts, outs)
	if err != nil {
		t.Fatalf("Complete(%d starts, %d outcomes): %v", len(starts), len(outs), err)
	}
	if len(errs) != len(outs) {
		t.Fatalf("Complete answered %d of %d outcomes", len(errs), len(outs))
	}
	return lost, errs
}

// completeOne records c alone through Queue.Complete and returns its own
// answer, or the call's error.
func completeOne(ctx context.Context, q queue.Queue, c driver.Completion) error {
	_, errs, err := q.Complete(ctx, nil, []driver.Completion{c})
	if err != nil {
		return err
	}
	if len(errs) != 1 {
		return fmt.Errorf("contracttest: Queue.Complete answered %d outcomes for 1", len(errs))
	}
	return errs[0]
}

// ackMany acks the jobs under leases in one Complete call and returns the
// leases that were not current.
func ackMany(ctx context.Context, q queue.Queue, leases []driver.Lease) ([]driver.Lease, error) {
	outs := make([]driver.Completion, len(leases))
	for i, l := range leases {
		outs[i] = driver.Completion{Lease: l, Outcome: driver.OutcomeDone}
	}
	_, errs, err := q.Complete(ctx, nil, outs)
	if err != nil {
		return nil, err
	}
	var lost []driver.Lease
	for i, e := range errs {
		switch {
		case errors.Is(e, queue.ErrLeaseLost):
			lost = append(lost, leases[i])
		case e != nil:
			return lost, fmt.Errorf("ack of %s: %w", leases[i].JobID, e)
		}
	}
	return lost, nil
}

// ackLease records that the job under l is done.
func ackLease(ctx context.Context, q queue.Queue, l driver.Lease) error {
	return completeOne(ctx, q, driver.Completion{Lease: l, Outcome: driver.OutcomeDone})
}

// nackLease releases the job under l for another attempt at retryAt.
func nackLease(ctx context.Context, q queue.Queue, l driver.Lease, retryAt time.Time, reason string) error {
	return completeOne(ctx, q, driver.Completion{Lease: l, Outcome: driver.OutcomeRetried, At: retryAt, Reason: reason})
}

// failLease dead-letters the job under l.
func failLease(ctx context.Context, q queue.Queue, l driver.Lease, reason string) error {
	return completeOne(ctx, q, driver.Completion{Lease: l, Outcome: driver.OutcomeFailed, Reason: reason})
}

// extendLease extends l alone through Queue.ExtendMany, answering
// ErrLeaseLost when it was not current.
func extendLease(ctx context.Context, q queue.Queue, l driver.Lease, d time.Duration) error {
	lost, err := q.ExtendMany(ctx, []driver.Lease{l}, d)
	if err == nil && len(lost) > 0 {
		err = fmt.Errorf("extending %s: %w", l.JobID, queue.ErrLeaseLost)
	}
	return err
}

// reserveAll reserves from queueName until want jobs came back or
// patience ran out, and returns them.
func reserveAll(t *testing.T, q queue.Queue, queueName string, want int) []queue.Job {
	t.Helper()
	var got []queue.Job
	deadline := time.Now().Add(patience)
	for len(got) < want && time.Now().Before(deadline) {
		got = append(got, reserve(t, q, []string{queueName}, want, longLease)...)
		if len(got) < want {
			time.Sleep(pollEvery)
		}
	}
	return got
}

// testComplete checks Queue.Complete: each outcome through the one batched
// call, and a batch mixing every outcome with start marks and lost leases,
// where each lost lease is reported for its own job and changes nothing.
func (s *suite) testComplete(t *testing.T) {
	s.check(t, "Done", func(t *testing.T, q queue.Queue) {
		j := newJob("cdone")
		push(t, q, j)
		r := reserveOne(t, q, "cdone", j.ID, longLease)
		if _, errs := complete(t, q, nil, driver.Completion{Lease: r.Lease(), Outcome: driver.OutcomeDone}); errs[0] != nil {
			t.Fatalf("Complete(done): %v", errs[0])
		}
		wantLen(t, q, "cdone", 0)
		expectNone(t, q, "cdone")
		wantErr(t, "Ack after Complete(done)", ackLease(t.Context(), q, r.Lease()), queue.ErrLeaseLost)
	})

	s.check(t, "Retried", func(t *testing.T, q queue.Queue) {
		j := newJob("cretry")
		push(t, q, j)
		r := reserveOne(t, q, "cretry", j.ID, longLease)
		at := time.Now().Add(300 * time.Millisecond)
		if _, errs := complete(t, q, nil, driver.Completion{Lease: r.Lease(), Outcome: driver.OutcomeRetried, At: at, Reason: "try again"}); errs[0] != nil {
			t.Fatalf("Complete(retried): %v", errs[0])
		}
		wantLen(t, q, "cretry", 1)
		again := s.awaitReserveNotBefore(t, q, "cretry", at)
		if again.ID != j.ID || again.Attempts != 2 || again.LastError != "try again" {
			t.Fatalf("after Complete(retried) Reserve gave %s, attempts %d, last error %q; want %s, 2, %q", again.ID, again.Attempts, again.LastError, j.ID, "try again")
		}
	})

	s.check(t, "Failed", func(t *testing.T, q queue.Queue) {
		j := newJob("cfail")
		push(t, q, j)
		r := reserveOne(t, q, "cfail", j.ID, longLease)
		if _, errs := complete(t, q, nil, driver.Completion{Lease: r.Lease(), Outcome: driver.OutcomeFailed, Reason: "broken"}); errs[0] != nil {
			t.Fatalf("Complete(failed): %v", errs[0])
		}
		dead := deadLetters(t, q, "cfail", 10)
		if len(dead) != 1 || dead[0].ID != j.ID || dead[0].LastError != "broken" {
			t.Fatalf("dead letters %v; want %s with error %q", ids(dead), j.ID, "broken")
		}
		expectNone(t, q, "cfail")
	})

	// A dead letter keeps the attempt limit that applied (the Worker's,
	// for a job that carried none), so that it can be shown after the
	// worker has gone; a limit of 0 leaves the job's own, and the limits
	// of one Complete call are each stored with their own job.
	s.check(t, "FailedKeepsLimit", func(t *testing.T, q queue.Queue) {
		cases := []struct {
			queue      string
			own, limit int
			push       bool
			want       int
		}{
			{queue: "climit-worker", limit: 3, want: 3},
			{queue: "climit-own", own: 12, limit: 12, want: 12},
			{queue: "climit-none", own: 7, want: 7},
			{queue: "climit-unset", want: 0},
			{queue: "climit-catch", limit: 4, push: true, want: 4},
		}
		outs := make([]driver.Completion, len(cases))
		jobs := make([]queue.Job, len(cases))
		for i, c := range cases {
			jobs[i] = newJob(c.queue)
			jobs[i].MaxAttempts = c.own
			push(t, q, jobs[i])
			r := reserveOne(t, q, c.queue, jobs[i].ID, longLease)
			outs[i] = driver.Completion{Lease: r.Lease(), Outcome: driver.OutcomeFailed, Reason: "broken", MaxAttempts: c.limit}
			if c.push {
				outs[i].Push = []queue.Job{newJob(c.queue + "-caught")}
			}
		}
		for i, err := range func() []error { _, errs := complete(t, q, nil, outs...); return errs }() {
			if err != nil {
				t.Fatalf("Complete(failed) of %s: %v", cases[i].queue, err)
			}
		}
		for i, c := range cases {
			dead := deadLetters(t, q, c.queue, 10)
			if len(dead) != 1 || dead[0].ID != jobs[i].ID {
				t.Fatalf("%s: dead letters %v; want %s", c.queue, ids(dead), jobs[i].ID)
			}
			if dead[0].MaxAttempts != c.want {
				t.Errorf("%s: the dead letter's MaxAttempts is %d after a completion with limit %d (its own %d); want %d",
					c.queue, dead[0].MaxAttempts, c.limit, c.own, c.want)
			}
		}
		wantLen(t, q, "climit-catch-caught", 1)
	})

	s.check(t, "Cancelled", func(t *testing.T, q queue.Queue) {
		j := newJob("ccancel")
		j.UniqueKey = "only-one"
		push(t, q, j)
		r := reserveOne(t, q, "ccancel", j.ID, longLease)
		if _, errs := complete(t, q, nil, driver.Completion{Lease: r.Lease(), Outcome: driver.OutcomeCancelled}); errs[0] != nil {
			t.Fatalf("Complete(cancelled): %v", errs[0])
		}
		wantLen(t, q, "ccancel", 0)
		if dead := deadLetters(t, q, "ccancel", 10); len(dead) != 0 {
			t.Fatalf("a cancelled job is among the dead letters: %v", ids(dead))
		}
		if in := inspector(q); in != nil {
			// Kept as cancelled, or gone where finished jobs are not kept.
			info, err := in.GetJob(t.Context(), j.ID)
			if !errors.Is(err, queue.ErrNotFound) && (err != nil || info.State != queue.StateCancelled) {
				t.Fatalf("GetJob after Complete(cancelled) = %v, %v; want state %s", info.State, err, queue.StateCancelled)
			}
		}
		// Its unique key is free again.
		k := newJob("ccancel")
		k.UniqueKey = "only-one"
		push(t, q, k)
	})

	s.check(t, "Snoozed", func(t *testing.T, q queue.Queue) {
		j := newJob("csnooze")
		push(t, q, j)
		r := reserveOne(t, q, "csnooze", j.ID, longLease)
		if _, errs := complete(t, q, nil, driver.Completion{Lease: r.Lease(), Outcome: driver.OutcomeSnoozed, At: time.Now(), Counted: true}); errs[0] != nil {
			t.Fatalf("Complete(snoozed): %v", errs[0])
		}
		again := awaitReserve(t, q, "csnooze", longLease)
		if again.ID != j.ID || again.Attempts != 1 || again.Snoozes != 1 {
			t.Fatalf("after Complete(snoozed) Reserve gave %s with %d attempts, %d snoozes; want %s with 1 (given back) and 1", again.ID, again.Attempts, again.Snoozes, j.ID)
		}
	})

	s.check(t, "Pushes", func(t *testing.T, q queue.Queue) {
		js := pushN(t, q, "cpush", 2)
		rs := reserveAll(t, q, "cpush", 2)
		if len(rs) != 2 {
			t.Fatalf("reserved %v, want both jobs", ids(rs))
		}
		next, catch, dup := newJob("cpush-next"), newJob("cpush-next"), newJob("cpush-next")
		dup.ID = js[1].ID // active (leased): skipped, not an error
		_, errs := complete(t, q, nil,
			driver.Completion{Lease: rs[0].Lease(), Outcome: driver.OutcomeDone, Push: []queue.Job{next, dup}},
			driver.Completion{Lease: rs[1].Lease(), Outcome: driver.OutcomeFailed, Reason: "x", Push: []queue.Job{catch}})
		if errs[0] != nil || errs[1] != nil {
			t.Fatalf("Complete with pushes: %v", errs)
		}
		got := reserveAll(t, q, "cpush-next", 2)
		if !slices.Equal(sortedIDs(got), sorted(next.ID, catch.ID)) {
			t.Fatalf("pushed jobs reserved %v, want %v", sortedIDs(got), sorted(next.ID, catch.ID))
		}
		// A lost lease pushes nothing.
		lone := newJob("cpush-lost")
		_, errs = complete(t, q, nil, driver.Completion{Lease: rs[0].Lease(), Outcome: driver.OutcomeDone, Push: []queue.Job{lone}})
		wantErr(t, "Complete(done) with a stale lease", errs[0], queue.ErrLeaseLost)
		expectNone(t, q, "cpush-lost")
	})

	s.check(t, "MixedWithLostLeases", func(t *testing.T, q queue.Queue) {
		pushN(t, q, "cmix", 7)
		js := reserveAll(t, q, "cmix", 7)
		if len(js) != 7 {
			t.Fatalf("reserved %d jobs, want 7", len(js))
		}
		u := newJob("cmix-start")
		push(t, q, u)
		got, err := q.ReserveUnstarted(t.Context(), []string{"cmix-start"}, 1, longLease)
		if err != nil || len(got) != 1 {
			t.Fatalf("ReserveUnstarted = %v, %v; want one job", ids(got), err)
		}
		unstarted := got[0]
		stale := driver.Lease{JobID: unstarted.ID, Token: unstarted.LeaseToken + "x"}
		starts := []driver.Lease{unstarted.Lease(), stale}
		wantLostStarts := []driver.Lease{stale}
		next := newJob("cmix-next")
		staleOf := func(j queue.Job) driver.Lease { return driver.Lease{JobID: j.ID, Token: j.LeaseToken + "x"} }
		outs := []driver.Completion{
			{Lease: js[0].Lease(), Outcome: driver.OutcomeDone, Push: []queue.Job{next}},
			{Lease: js[1].Lease(), Outcome: driver.OutcomeRetried, At: time.Now(), Reason: "r1"},
			{Lease: js[2].Lease(), Outcome: driver.OutcomeFailed, Reason: "dead2"},
			{Lease: js[3].Lease(), Outcome: driver.OutcomeSnoozed, At: time.Now()},
			{Lease: js[4].Lease(), Outcome: driver.OutcomeCancelled},
			{Lease: staleOf(js[5]), Outcome: driver.OutcomeDone},
			{Lease: staleOf(js[6]), Outcome: driver.OutcomeRetried, At: time.Now(), Reason: "lost"},
			{Lease: driver.Lease{JobID: driver.NewID(), Token: "t"}, Outcome: driver.OutcomeFailed, Reason: "unknown job"},
		}
		lostStarts, errs := complete(t, q, starts, outs...)
		wantLost(t, "Complete's starts", lostStarts, wantLostStarts)
		for i, err := range errs {
			if i < 5 && err != nil {
				t.Errorf("outcome %d (%s): %v; want it recorded", i, outs[i].Outcome, err)
			}
			if i >= 5 && !errors.Is(err, queue.ErrLeaseLost) {
				t.Errorf("outcome %d (%s) under a stale lease: %v; want ErrLeaseLost", i, outs[i].Outcome, err)
			}
		}
		// Ready again: the retried and the snoozed jobs, and the pushed one.
		again := reserveAll(t, q, "cmix", 2)
		if !slices.Equal(sortedIDs(again), sorted(js[1].ID, js[3].ID)) {
			t.Fatalf("ready after Complete: %v; want the retried %s and the snoozed %s", sortedIDs(again), js[1].ID, js[3].ID)
		}
		for _, j := range again {
			if want := map[string]int{js[1].ID: 2, js[3].ID: 1}[j.ID]; j.Attempts != want {
				t.Errorf("job %s reserved with %d attempts, want %d", j.ID, j.Attempts, want)
			}
		}
		reserveOne(t, q, "cmix-next", next.ID, longLease)
		dead := deadLetters(t, q, "cmix", 10)
		if len(dead) != 1 || dead[0].ID != js[2].ID || dead[0].LastError != "dead2" {
			t.Fatalf("dead letters %v; want %s", ids(dead), js[2].ID)
		}
		// The jobs whose outcome came under a stale lease are untouched:
		// still leased to their holder, who can finish them.
		expectNone(t, q, "cmix")
		ack(t, q, js[5])
		ack(t, q, js[6])
		// The start counted the unstarted job's attempt.
		nack(t, q, unstarted, time.Now(), "again")
		if r := awaitReserve(t, q, "cmix-start", longLease); r.Attempts != 2 {
			t.Fatalf("after a start and a retry Reserve gave %d attempts, want 2", r.Attempts)
		}
	})

	checkAs(s, t, "BatchMember", func(t *testing.T, q queue.Queue, b driver.Workflows) {
		rec := newBatch(t, 2, false)
		id, err := queue.DispatchBatch(t.Context(), q, rec)
		if err != nil {
			t.Fatalf("DispatchBatch: %v", err)
		}
		ms := reserveMembers(t, q, 2)
		var outs []driver.Completion
		for _, m := range ms {
			outs = append(outs, driver.Completion{Lease: m.Lease(), Outcome: driver.OutcomeDone, Batch: queue.BatchOf(&m)})
		}
		if _, errs := complete(t, q, nil, outs...); errs[0] != nil || errs[1] != nil {
			t.Fatalf("Complete of the members: %v", errs)
		}
		wantBatch(t, "after Complete of both members", getBatch(t, b, id), 2, 0, 2, 0, 0)
	})
}
