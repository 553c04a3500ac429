package queue

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/meridianjobs/meridian/queue/driver"
)

// TestTermOverByTheClock: a term reports itself over as soon as the clock
// has passed its end, through its own Err and through Leading on a
// derived context, with no timer involved: a process resumed after a
// pause (SIGSTOP) reads the clock before its timers have run.
func TestTermOverByTheClock(t *testing.T) {
	t.Parallel()
	end := time.Now().Add(20 * time.Millisecond)
	tm := newTerm(t.Context(), driver.Fence{Lease: "lead", Epoch: 7}, end)
	derived, cancel := context.WithCancel(tm)
	defer cancel()
	if err := Leading(derived); err != nil {
		t.Fatalf("Leading during the term = %v", err)
	}
	if e, ok := LeaderEpoch(derived); !ok || e != 7 {
		t.Fatalf("LeaderEpoch = %d, %v; want 7", e, ok)
	}
	for time.Now().Before(end) {
		// Wait on the clock, not on a timer.
	}
	if err := Leading(derived); !errors.Is(err, ErrLeadershipLost) {
		t.Errorf("Leading on a derived context after the term's end = %v, want ErrLeadershipLost", err)
	}
	if tm.Err() == nil {
		t.Error("the term's context is not done after its end")
	}
	if tm.extend(time.Now().Add(time.Hour)) {
		t.Error("a term that ended was extended")
	}
}

// TestTermExtends: a renewal before the end moves it.
func TestTermExtends(t *testing.T) {
	t.Parallel()
	tm := newTerm(t.Context(), driver.Fence{Lease: "lead", Epoch: 1}, time.Now().Add(time.Hour))
	later := time.Now().Add(2 * time.Hour)
	if !tm.extend(later) || !tm.endTime().Equal(later) || tm.Err() != nil {
		t.Errorf("extend during the term: end %s, err %v", tm.endTime(), tm.Err())
	}
	tm.stop(ErrLeadershipLost)
	if err := Leading(tm); !errors.Is(err, ErrLeadershipLost) {
		t.Errorf("Leading after stop = %v", err)
	}
}
