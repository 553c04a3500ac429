package contracttest

import (
	"context"
	"testing"
	"time"

	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// startLeases counts the attempts of the jobs under leases through
// Complete's starts, and returns the leases that were not current.
func startLeases(ctx context.Context, q queue.Queue, leases []driver.Lease) ([]driver.Lease, error) {
	lost, _, err := q.Complete(ctx, leases, nil)
	return lost, err
}

// startAck counts starts and acks acks in one Complete call, and returns
// the leases of each that were not current.
func startAck(ctx context.Context, q queue.Queue, starts, acks []driver.Lease) (lostStarts, lostAcks []driver.Lease, err error) {
	outs := make([]driver.Completion, len(acks))
	for i, l := range acks {
		outs[i] = driver.Completion{Lease: l, Outcome: driver.OutcomeDone}
	}
	lostStarts, errs, err := q.Complete(ctx, starts, outs)
	if err != nil {
		return nil, nil, err
	}
	for i, e := range errs {
		if e != nil {
			lostAcks = append(lostAcks, acks[i])
		}
	}
	return lostStarts, lostAcks, nil
}

// testStarter checks Queue.ReserveUnstarted and Complete's starts: an
// attempt counts only once its handler started, so a job that waited
// leased in a process that died keeps its attempts; and starts and acks
// counted together.
func (s *suite) testStarter(t *testing.T) {
	s.check(t, "UnstartedKeepsAttempts", func(t *testing.T, q queue.Queue) {
		j := newJob("unst")
		push(t, q, j)
		got, err := q.ReserveUnstarted(t.Context(), []string{"unst"}, 10, shortLease)
		if err != nil || len(got) != 1 || got[0].ID != j.ID {
			t.Fatalf("ReserveUnstarted = %v, %v; want %s", ids(got), err, j.ID)
		}
		if got[0].Attempts != 0 || got[0].LeaseToken == "" || got[0].LeaseExpiresAt.IsZero() {
			t.Fatalf("ReserveUnstarted gave attempts %d, token %q, expiry %v; want 0 attempts and a lease", got[0].Attempts, got[0].LeaseToken, got[0].LeaseExpiresAt)
		}
		expectNone(t, q, "unst") // leased: one holder at a time
		// Its holder dies before starting it: the lease expires and the job
		// comes back with no attempt counted, then Reserve counts one.
		again := s.awaitReserveNotBefore(t, q, "unst", got[0].LeaseExpiresAt)
		if again.ID != j.ID || again.Attempts != 1 {
			t.Fatalf("after the unstarted lease expired Reserve gave %s with %d attempts; want %s with 1", again.ID, again.Attempts, j.ID)
		}
		if again.LeaseToken == got[0].LeaseToken {
			t.Fatalf("re-delivery reused lease token %q", got[0].LeaseToken)
		}
		// The dead holder's lease is stale: Start counts nothing.
		lost, err := startLeases(t.Context(), q, []driver.Lease{got[0].Lease()})
		if err != nil {
			t.Fatalf("Start of a stale lease: %v", err)
		}
		wantLost(t, "Start", lost, []driver.Lease{got[0].Lease()})
		// A Nack keeps the attempt the started delivery counted.
		nack(t, q, again, time.Now(), "retry")
		third := awaitReserve(t, q, "unst", longLease)
		if third.Attempts != 2 {
			t.Fatalf("after one started and one unstarted delivery and a retry, Reserve gave %d attempts; want 2", third.Attempts)
		}
		ack(t, q, third)
	})

	s.check(t, "StartingCountsFreshNotRecovered", func(t *testing.T, q queue.Queue) {
		// ReserveStarting counts the attempt of a job handed out fresh, in
		// the claim, and not of one taken back from an expired lease:
		// Complete's starts count that one when it starts.
		first, second := newJob("sst"), newJob("sst")
		push(t, q, first)
		got, err := q.ReserveStarting(t.Context(), []string{"sst"}, 1, shortLease)
		if err != nil || len(got) != 1 || got[0].ID != first.ID {
			t.Fatalf("ReserveStarting = %v, %v; want %s", ids(got), err, first.ID)
		}
		if got[0].Attempts != 1 || got[0].Recovered || got[0].LeaseToken == "" {
			t.Fatalf("ReserveStarting gave attempts %d, recovered %v, token %q; want 1, false and a lease", got[0].Attempts, got[0].Recovered, got[0].LeaseToken)
		}
		// Its holder dies: the lease expires, and the job comes back
		// recovered, its attempt as stored, first in its old place, beside
		// a job pushed since.
		expired := got[0].LeaseExpiresAt.Add(s.tol)
		eventually(t, "the lease's expiry", func() bool { return time.Now().After(expired) })
		push(t, q, second)
		var again []queue.Job
		eventually(t, "the expired job's return", func() bool {
			var err error
			again, err = q.ReserveStarting(t.Context(), []string{"sst"}, 10, longLease)
			if err != nil {
				t.Fatalf("ReserveStarting: %v", err)
			}
			if len(again) == 1 && again[0].ID != first.ID {
				// The store's clock had the lease current still: give the
				// fresh job back and ask again.
				ack(t, q, again[0])
				push(t, q, newJob("sst"))
				return false
			}
			return len(again) > 0
		})
		if len(again) != 2 || again[0].ID != first.ID {
			t.Fatalf("after the lease expired ReserveStarting = %v; want %s, then another", ids(again), first.ID)
		}
		if !again[0].Recovered || again[0].Attempts != 1 {
			t.Fatalf("the expired job came back recovered %v with %d attempts; want recovered with 1 (the claim counts none)", again[0].Recovered, again[0].Attempts)
		}
		if again[1].Recovered || again[1].Attempts != 1 {
			t.Fatalf("the fresh job came back recovered %v with %d attempts; want not recovered with 1", again[1].Recovered, again[1].Attempts)
		}
		// The recovered job starts: Complete counts its second attempt.
		if lost, err := startLeases(t.Context(), q, []driver.Lease{again[0].Lease()}); err != nil || len(lost) != 0 {
			t.Fatalf("Start = %v, %v; want nothing lost", lost, err)
		}
		nack(t, q, again[0], time.Now(), "retry")
		ack(t, q, again[1])
		third := awaitReserve(t, q, "sst", longLease)
		if third.ID != first.ID || third.Attempts != 3 {
			t.Fatalf("Reserve gave %s with %d attempts; want %s with 3 (claim, start, then Reserve's)", third.ID, third.Attempts, first.ID)
		}
		ack(t, q, third)
		wantLen(t, q, "sst", 0)
	})

	s.check(t, "StartCounts", func(t *testing.T, q queue.Queue) {
		jobs, batch, stale := staleBatch(t, q, "sc", longLease)
		lost, err := startLeases(t.Context(), q, batch)
		if err != nil {
			t.Fatalf("Start: %v", err)
		}
		wantLost(t, "Start", lost, stale)
		// jobs[1] and jobs[2] had one attempt from Reserve and one from
		// Start; jobs[3]'s Start had a wrong token.
		want := map[string]int{jobs[1].ID: 2, jobs[2].ID: 2, jobs[3].ID: 1}
		for _, j := range jobs[1:] {
			nack(t, q, j, time.Now(), "retry")
		}
		for range 3 {
			r := awaitReserve(t, q, "sc", longLease)
			// Reserve counted one more.
			if r.Attempts != want[r.ID]+1 {
				t.Errorf("job %s has %d attempts, want %d", r.ID, r.Attempts, want[r.ID]+1)
			}
			ack(t, q, r)
		}

		// An unstarted reservation, started: its attempt counts once.
		u := newJob("sc")
		push(t, q, u)
		got, err := q.ReserveUnstarted(t.Context(), []string{"sc"}, 1, longLease)
		if err != nil || len(got) != 1 {
			t.Fatalf("ReserveUnstarted = %v, %v", ids(got), err)
		}
		if lost, err := startLeases(t.Context(), q, []driver.Lease{got[0].Lease()}); err != nil || len(lost) != 0 {
			t.Fatalf("Start = %v, %v; want nothing lost", lost, err)
		}
		nack(t, q, got[0], time.Now(), "retry")
		if r := awaitReserve(t, q, "sc", longLease); r.Attempts != 2 {
			t.Fatalf("a started unstarted reservation then Reserve gave %d attempts, want 2", r.Attempts)
		}

		if lost, err := startLeases(t.Context(), q, nil); err != nil || len(lost) != 0 {
			t.Fatalf("Start(nil) = %v, %v; want none, nil", lost, err)
		}
	})

	s.check(t, "SwappedTokens", func(t *testing.T, q queue.Queue) {
		// Starts and acks each name two jobs with the other's token; only
		// the first lease of each list is current.
		jobs, starts := swappedBatch(t, q, "sws")
		acked, acks := swappedBatch(t, q, "swa")
		lostStarts, lostAcks, err := startAck(t.Context(), q, starts, acks)
		if err != nil {
			t.Fatalf("StartAck: %v", err)
		}
		wantLost(t, "StartAck's starts", lostStarts, starts[1:])
		wantLost(t, "StartAck's acks", lostAcks, acks[1:])
		wantLen(t, q, "swa", 2)
		ack(t, q, acked[1])
		ack(t, q, acked[2])
		// Only the first job's attempt was counted twice (Reserve, Start).
		for _, j := range jobs {
			nack(t, q, j, time.Now(), "retry")
		}
		want := map[string]int{jobs[0].ID: 3, jobs[1].ID: 2, jobs[2].ID: 2}
		for range 3 {
			r := awaitReserve(t, q, "sws", longLease)
			if r.Attempts != want[r.ID] {
				t.Errorf("job %s has %d attempts, want %d", r.ID, r.Attempts, want[r.ID])
			}
			ack(t, q, r)
		}
	})

	s.check(t, "StartAck", func(t *testing.T, q queue.Queue) {
		// The acks: one already acked, two current, a wrong token, an
		// unknown job.
		jobs, acks, staleAcks := staleBatch(t, q, "sa", longLease)
		// The starts: two prefetched jobs, a wrong token, an unknown job.
		pushN(t, q, "sa2", 2)
		pre, err := q.ReserveUnstarted(t.Context(), []string{"sa2"}, 2, longLease)
		if err != nil || len(pre) != 2 {
			t.Fatalf("ReserveUnstarted = %v, %v; want 2 jobs", ids(pre), err)
		}
		wrong := driver.Lease{JobID: pre[1].ID, Token: pre[1].LeaseToken + "x"}
		unknown := driver.Lease{JobID: driver.NewID(), Token: "t"}
		starts := []driver.Lease{pre[0].Lease(), wrong, pre[1].Lease(), unknown}
		lostStarts, lostAcks, err := startAck(t.Context(), q, starts, acks)
		if err != nil {
			t.Fatalf("StartAck: %v", err)
		}
		wantLost(t, "StartAck's starts", lostStarts, []driver.Lease{wrong, unknown})
		wantLost(t, "StartAck's acks", lostAcks, staleAcks)
		// The acked jobs are gone; jobs[3] (wrong token) is still leased.
		expectNone(t, q, "sa")
		ack(t, q, jobs[3])
		// Each started job counted one attempt: nacked, Reserve counts a
		// second.
		for _, j := range pre {
			nack(t, q, j, time.Now(), "retry")
		}
		for range 2 {
			if r := awaitReserve(t, q, "sa2", longLease); r.Attempts != 2 {
				t.Errorf("job %s started by StartAck then reserved has %d attempts, want 2", r.ID, r.Attempts)
			} else {
				ack(t, q, r)
			}
		}
		// Either list may be empty.
		if ls, la, err := startAck(t.Context(), q, nil, nil); err != nil || len(ls)+len(la) != 0 {
			t.Fatalf("StartAck(nil, nil) = %v, %v, %v; want none, nil", ls, la, err)
		}
		_, _, err = startAck(cancelled(t), q, []driver.Lease{unknown}, []driver.Lease{unknown})
		wantErr(t, "StartAck with a cancelled context", err, context.Canceled)
	})

	s.check(t, "Context", func(t *testing.T, q queue.Queue) {
		j := newJob("stc")
		push(t, q, j)
		got, err := q.ReserveUnstarted(cancelled(t), []string{"stc"}, 1, longLease)
		wantErr(t, "ReserveUnstarted with a cancelled context", err, context.Canceled)
		if len(got) != 0 {
			t.Fatalf("ReserveUnstarted with a cancelled context returned %v", ids(got))
		}
		r := reserveOne(t, q, "stc", j.ID, longLease)
		_, err = startLeases(cancelled(t), q, []driver.Lease{r.Lease()})
		wantErr(t, "Start with a cancelled context", err, context.Canceled)
		ack(t, q, r)
	})
}
