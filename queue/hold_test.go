package queue

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/meridianjobs/meridian/queue/driver"
)

func TestLeaseMargin(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		lease, set, want time.Duration
	}{
		{time.Minute, 0, 6 * time.Second},            // a tenth
		{3 * time.Second, 0, 500 * time.Millisecond}, // at least 500 ms
		{800 * time.Millisecond, 0, 400 * time.Millisecond},
		{time.Minute, 2 * time.Second, 2 * time.Second},
		{2 * time.Second, 5 * time.Second, time.Second}, // at most half the lease
	} {
		if got := leaseMargin(tc.lease, tc.set); got != tc.want {
			t.Errorf("leaseMargin(%s, %s) = %s, want %s", tc.lease, tc.set, got, tc.want)
		}
	}
}

// A lost attempt's cleanup removes its own entry, by lease token: a newer
// lease of the same job in the same process keeps its entry (issue 25
// item 1), and the older attempt's handler is cancelled when the store
// leases the job again.
func TestHeldLeasesRemoveByToken(t *testing.T) {
	t.Parallel()
	s := newHeldLeases()
	old := job("a")
	old.LeaseExpiresAt = time.Now().Add(time.Minute)
	s.add(old, time.Minute)
	hOld, jcOld := s.run(old, nil, context.Background(), time.Now())
	renewed := job("a")
	renewed.LeaseToken = "t-a-2"
	renewed.LeaseExpiresAt = time.Now().Add(time.Minute)
	s.add(renewed, time.Minute)
	if !errors.Is(context.Cause(jcOld), ErrLeaseLost) {
		t.Fatalf("the older attempt's handler cause = %v, want ErrLeaseLost once the job was leased again", context.Cause(jcOld))
	}
	if lost, _, _ := s.stop(hOld, 0); !lost {
		t.Fatal("the older attempt's lease not reported lost")
	}
	s.remove(old.Lease())
	if !s.anyHold([]driver.Lease{renewed.Lease()}, time.Now()) || s.len() != 1 {
		t.Fatal("removing the older attempt's lease dropped the newer attempt's entry")
	}
	s.remove(renewed.Lease())
	if s.len() != 0 {
		t.Fatal("the newer lease was not removed by its own token")
	}
}

// Holding reads the clock itself: a lease past its deadline is over at the
// first look, before any timer ran (a process resumed after SIGSTOP), on a
// context derived from the handler's, and so is a concurrency slot's hold
// inside it.
func TestHoldingReadsTheClock(t *testing.T) {
	t.Parallel()
	s := newHeldLeases()
	s.margin = 500 * time.Millisecond
	j := job("a")
	j.LeaseExpiresAt = time.Now().Add(time.Hour)
	s.add(j, time.Hour)
	_, jc := s.run(j, nil, context.Background(), time.Now())
	derived, cancel := context.WithCancel(jc)
	defer cancel()
	if err := Holding(derived); err != nil {
		t.Fatalf("Holding = %v while the lease holds", err)
	}
	slot := newHold(derived, time.Now().Add(time.Hour), ErrLeaseLost)
	defer slot.stop(context.Canceled)
	// The process was paused past the lease's deadline.
	s.mu.Lock()
	s.m["a"].deadline.Store(time.Now().Add(-time.Millisecond).UnixNano())
	s.mu.Unlock()
	if err := Holding(slot); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("Holding = %v after the deadline passed, want ErrLeaseLost", err)
	}
	if !errors.Is(context.Cause(derived), ErrLeaseLost) || derived.Err() == nil {
		t.Fatal("the handler's context is not cancelled after Holding found the lease over")
	}

	// A slot's hold alone.
	other := newHold(context.Background(), time.Now().Add(-time.Millisecond), ErrLeaseLost)
	defer other.stop(context.Canceled)
	if err := Holding(other); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("Holding = %v for a slot past its deadline, want ErrLeaseLost", err)
	}
	fresh := newHold(context.Background(), time.Now().Add(time.Hour), ErrLeaseLost)
	if !fresh.extend(time.Now().Add(2*time.Hour)) || Holding(fresh) != nil {
		t.Fatal("a hold within its deadline did not extend")
	}
	fresh.stop(context.Canceled)
	if fresh.extend(time.Now().Add(3 * time.Hour)) {
		t.Fatal("an ended hold extended")
	}
}

// A held job whose deadline passed while it waited for a handler (a
// prefetched job whose lease could not be renewed) is not started: another
// process may be given it at any moment.
func TestExecutorDoesNotStartAJobPastItsDeadline(t *testing.T) {
	t.Parallel()
	sq := &stubQueue{t: t}
	c := newCompleter(sq) // not started: outcomes are recorded at once
	c.leases.margin = 500 * time.Millisecond
	ran := false
	e := &executor{
		handlers:    map[string]Handler{"greet": func(context.Context, Job) error { ran = true; return nil }},
		maxAttempts: func(*Job) int { return 3 }, backoff: Fixed(time.Minute), base: context.Background(),
		leases: c.leases, completer: c, abandoned: newAbandoned(1), observe: noObserve, log: slog.New(slog.DiscardHandler),
	}
	j := job("a")
	j.LeaseExpiresAt = time.Now().Add(400 * time.Millisecond) // within the margin
	c.leases.add(j, time.Minute)
	e.execute(j, nil)
	if ran {
		t.Fatal("the handler ran under a lease past its deadline")
	}
	if c.leases.len() != 0 {
		t.Fatal("the job's lease is still held")
	}
}
