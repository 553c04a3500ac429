package contracttest

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// staleCalls makes every lease-guarded call with l and fails unless each
// returns ErrLeaseLost.
func staleCalls(t *testing.T, q queue.Queue, l driver.Lease, when string) {
	t.Helper()
	ctx := t.Context()
	wantErr(t, "Extend "+when, extendLease(ctx, q, l, time.Hour), queue.ErrLeaseLost)
	wantErr(t, "Nack "+when, nackLease(ctx, q, l, time.Now(), "stale nack"), queue.ErrLeaseLost)
	wantErr(t, "Fail "+when, failLease(ctx, q, l, "stale fail"), queue.ErrLeaseLost)
	wantErr(t, "Ack "+when, ackLease(ctx, q, l), queue.ErrLeaseLost)
}

// testLease checks leases: expiry and re-delivery, stale calls, Nack,
// Extend, attempt bookkeeping and exclusive delivery under concurrency.
func (s *suite) testLease(t *testing.T) {
	s.check(t, "ExpiryRedelivers", func(t *testing.T, q queue.Queue) {
		j := newJob("exp")
		push(t, q, j)
		reservedAt := time.Now()
		first := reserveOne(t, q, "exp", j.ID, shortLease)
		if first.Attempts != 1 {
			t.Fatalf("Attempts = %d, want 1", first.Attempts)
		}
		second := s.awaitReserveNotBefore(t, q, "exp", reservedAt.Add(shortLease))
		if second.ID != j.ID || second.Attempts != 2 {
			t.Fatalf("re-delivered job %s with Attempts %d, want %s with 2 (the expired attempt counts)", second.ID, second.Attempts, j.ID)
		}
		if second.LeaseToken == first.LeaseToken {
			t.Fatalf("re-delivery reused lease token %q", first.LeaseToken)
		}

		staleCalls(t, q, first.Lease(), "under an expired lease taken by another consumer")

		// The job is untouched: still held by the second lease.
		expectNone(t, q, "exp")
		wantLen(t, q, "exp", 1)
		if dl := deadLetters(t, q, "exp", 10); len(dl) != 0 {
			t.Fatalf("stale Fail dead-lettered %v", ids(dl))
		}
		ack(t, q, second)
		wantLen(t, q, "exp", 0)
	})

	s.check(t, "ExpiredKeepsItsPlace", func(t *testing.T, q queue.Queue) {
		// A job whose lease expired (its worker crashed) runs again before
		// jobs queued after it: it keeps its available-at and insertion
		// order, so the lease bounds how soon it runs again.
		early := newJob("place")
		push(t, q, early)
		reserveOne(t, q, "place", early.ID, shortLease)
		// The lease ends at most shortLease after Reserve returned.
		leasedBy := time.Now()
		var later []string
		for range 3 {
			j := newJob("place")
			push(t, q, j)
			later = append(later, j.ID)
		}
		// Wait out the lease without reserving: a reserve before it ends
		// would rightly take a later job.
		time.Sleep(time.Until(leasedBy.Add(shortLease + s.tol + 50*time.Millisecond)))
		got := reserve(t, q, []string{"place"}, 1, longLease)
		if len(got) != 1 || got[0].ID != early.ID {
			t.Fatalf("after its lease expired, Reserve returned %v before the expired job %s (queued before %v)", ids(got), early.ID, later)
		}
		rest := reserve(t, q, []string{"place"}, 10, longLease)
		if !slices.Equal(ids(rest), later) {
			t.Fatalf("then Reserve returned %v, want %v in insertion order", ids(rest), later)
		}
	})

	s.check(t, "StaleAfterFinish", func(t *testing.T, q queue.Queue) {
		acked, nacked, failed := newJob("st"), newJob("st"), newJob("st")
		push(t, q, acked)
		r := reserveOne(t, q, "st", acked.ID, longLease)
		ack(t, q, r)
		staleCalls(t, q, r.Lease(), "after Ack")

		push(t, q, failed)
		r = reserveOne(t, q, "st", failed.ID, longLease)
		fail(t, q, r, "dead")
		staleCalls(t, q, r.Lease(), "after Fail")
		if dl := deadLetters(t, q, "st", 10); len(dl) != 1 || dl[0].LastError != "dead" {
			t.Fatalf("dead letters %+v, want one with LastError %q", dl, "dead")
		}

		push(t, q, nacked)
		r = reserveOne(t, q, "st", nacked.ID, longLease)
		nack(t, q, r, time.Now().Add(time.Hour), "later")
		staleCalls(t, q, r.Lease(), "after Nack")
		wantLen(t, q, "st", 1)
		expectNone(t, q, "st")
	})

	s.check(t, "WrongToken", func(t *testing.T, q queue.Queue) {
		j := newJob("tok")
		push(t, q, j)
		r := reserveOne(t, q, "tok", j.ID, longLease)
		staleCalls(t, q, driver.Lease{JobID: j.ID, Token: r.LeaseToken + "x"}, "with a wrong token")
		staleCalls(t, q, driver.Lease{JobID: j.ID}, "with an empty token")
		staleCalls(t, q, driver.Lease{JobID: driver.NewID(), Token: r.LeaseToken}, "for an unknown job")
		ack(t, q, r)
	})

	s.check(t, "NackRetryTime", func(t *testing.T, q queue.Queue) {
		j := newJob("nack")
		push(t, q, j)
		r := reserveOne(t, q, "nack", j.ID, longLease)
		retryAt := time.Now().Add(500 * time.Millisecond)
		nack(t, q, r, retryAt, "boom: first failure")
		wantLen(t, q, "nack", 1)
		r = s.awaitReserveNotBefore(t, q, "nack", retryAt)
		if r.Attempts != 2 || r.LastError != "boom: first failure" {
			t.Fatalf("after Nack: Attempts %d, LastError %q; want 2, %q", r.Attempts, r.LastError, "boom: first failure")
		}

		nack(t, q, r, time.Now().Add(-time.Second), "second failure") // a past retry time means now
		r = reserveOne(t, q, "nack", j.ID, longLease)
		if r.Attempts != 3 || r.LastError != "second failure" {
			t.Fatalf("after a second Nack: Attempts %d, LastError %q; want 3, %q", r.Attempts, r.LastError, "second failure")
		}
	})

	s.check(t, "NackKeepsOrder", func(t *testing.T, q queue.Queue) {
		high := newJob("nk")
		high.Priority = 5
		push(t, q, high)
		r := reserveOne(t, q, "nk", high.ID, longLease)
		low := newJob("nk")
		push(t, q, low)
		nack(t, q, r, time.Time{}, "retry now")
		got := reserve(t, q, []string{"nk"}, 1, longLease)
		if len(got) != 1 || got[0].ID != high.ID {
			t.Fatalf("after Nack reserved %v, want the higher-priority job %s first", ids(got), high.ID)
		}
	})

	s.check(t, "AttemptsBookkeeping", func(t *testing.T, q queue.Queue) {
		j := newJob("att")
		j.MaxAttempts = 3
		j.Timeout = 2 * time.Second
		push(t, q, j)
		var r queue.Job
		for want := 1; want <= 3; want++ {
			r = reserveOne(t, q, "att", j.ID, longLease)
			if r.Attempts != want || r.MaxAttempts != 3 || r.Timeout != 2*time.Second {
				t.Fatalf("delivery %d: Attempts %d, MaxAttempts %d, Timeout %v; want %d, 3, 2s", want, r.Attempts, r.MaxAttempts, r.Timeout, want)
			}
			if want < 3 {
				nack(t, q, r, time.Time{}, fmt.Sprintf("failure %d", want))
			}
		}
		// The worker decides that attempts are used up; the queue keeps the count.
		fail(t, q, r, "attempts exhausted")
		dl := deadLetters(t, q, "att", 10)
		if len(dl) != 1 || dl[0].Attempts != 3 || dl[0].MaxAttempts != 3 || dl[0].LastError != "attempts exhausted" {
			t.Fatalf("dead letter %+v, want Attempts 3, MaxAttempts 3, LastError %q", dl, "attempts exhausted")
		}
	})

	s.check(t, "Extend", func(t *testing.T, q queue.Queue) {
		j := newJob("ext")
		push(t, q, j)
		const lease = time.Second // long enough to Extend in time on a loaded machine
		r := reserveOne(t, q, "ext", j.ID, lease)
		if err := extendLease(t.Context(), q, r.Lease(), longLease); err != nil {
			t.Fatalf("Extend within the lease: %v", err)
		}
		time.Sleep(lease + 500*time.Millisecond)
		expectNone(t, q, "ext") // the original lease has run out; the extended one holds
		if err := extendLease(t.Context(), q, r.Lease(), longLease); err != nil {
			t.Fatalf("second Extend: %v", err)
		}
		ack(t, q, r)
		wantLen(t, q, "ext", 0)
	})

	s.check(t, "ExtendShortens", func(t *testing.T, q queue.Queue) {
		j := newJob("ext")
		push(t, q, j)
		r := reserveOne(t, q, "ext", j.ID, longLease)
		if err := extendLease(t.Context(), q, r.Lease(), shortLease); err != nil {
			t.Fatalf("Extend: %v", err)
		}
		again := awaitReserve(t, q, "ext", longLease) // now plus d, even when shorter
		if again.Attempts != 2 {
			t.Fatalf("Attempts = %d, want 2", again.Attempts)
		}
		staleCalls(t, q, r.Lease(), "after the extended lease expired")
	})

	s.check(t, "ConcurrentReservers", func(t *testing.T, q queue.Queue) {
		s.concurrentReservers(t, []queue.Queue{q}, 240)
	})
}

// concurrentReservers pushes n jobs from two goroutines while eight
// goroutines, spread over handles, reserve and ack them. It fails if a job
// is held by two reservers at once or if any job is not delivered exactly
// once (leases are long enough never to expire).
func (s *suite) concurrentReservers(t *testing.T, handles []queue.Queue, n int) {
	const reservers, pushers = 8, 2
	ctx := t.Context()
	var (
		mu        sync.Mutex
		held      = make(map[string]bool)
		delivered = make(map[string]int)
		errs      []string
	)
	report := func(format string, args ...any) {
		mu.Lock()
		errs = append(errs, fmt.Sprintf(format, args...))
		mu.Unlock()
	}
	var wg sync.WaitGroup
	for p := range pushers {
		wg.Go(func() {
			for i := range n / pushers {
				j := newJob("conc")
				j.Priority = i % 3
				if err := handles[p%len(handles)].Push(ctx, j); err != nil {
					report("Push: %v", err)
					return
				}
			}
		})
	}
	deadline := time.Now().Add(4 * patience)
	for r := range reservers {
		h := handles[r%len(handles)]
		wg.Go(func() {
			for time.Now().Before(deadline) {
				mu.Lock()
				finished := len(delivered) == n || len(errs) > 0
				mu.Unlock()
				if finished {
					return
				}
				jobs, err := h.Reserve(ctx, []string{"conc"}, 1+r%4, longLease)
				if err != nil {
					report("Reserve: %v", err)
					return
				}
				if len(jobs) == 0 {
					time.Sleep(time.Millisecond)
					continue
				}
				mu.Lock()
				for _, j := range jobs {
					if held[j.ID] {
						errs = append(errs, fmt.Sprintf("job %s reserved while another reserver held it", j.ID))
					}
					held[j.ID] = true
					delivered[j.ID]++
				}
				mu.Unlock()
				for _, j := range jobs {
					if err := ackLease(ctx, h, j.Lease()); err != nil {
						report("Ack(%s): %v", j.ID, err)
					}
					mu.Lock()
					delete(held, j.ID)
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	for _, e := range errs {
		t.Error(e)
	}
	if len(delivered) != n {
		t.Fatalf("%d distinct jobs delivered, want %d", len(delivered), n)
	}
	for id, c := range delivered {
		if c != 1 {
			t.Errorf("job %s delivered %d times under leases that never expired, want once", id, c)
		}
	}
	wantLen(t, handles[0], "conc", 0)
}
