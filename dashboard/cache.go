package dashboard

import (
	"context"
	"sync"
	"time"
)

// statsTTL is how long driver-mode pages reuse the figures and metrics one
// request read. However many dashboards are open, the store answers at most
// one QueueStats and one Metrics call per interval; actions clear the cache
// so their result shows at once.
const statsTTL = 2 * time.Second

// shared holds the last result of an expensive read for a short time and
// lets concurrent requests wait for one read instead of each making their
// own. Its zero value is ready to use.
type shared[T any] struct {
	mu   sync.Mutex
	at   time.Time     // when val was read; zero when there is none
	val  T             // read-only once stored: callers share it
	busy chan struct{} // closed when the read in flight ends; nil when none
	// gen counts resets. A read keeps its result only if no reset came
	// while it ran: a read that started before an action finished may
	// have seen the store before it, and must not be cached after the
	// action dropped the cache.
	gen uint64
}

// get returns the value read less than ttl ago, or reads it with fetch.
// A failed read is not kept: the next caller tries again.
func (s *shared[T]) get(ctx context.Context, ttl time.Duration, fetch func(context.Context) (T, error)) (T, error) {
	s.mu.Lock()
	for {
		if !s.at.IsZero() && time.Since(s.at) < ttl {
			v := s.val
			s.mu.Unlock()
			return v, nil
		}
		if s.busy == nil {
			break
		}
		busy := s.busy
		s.mu.Unlock()
		select {
		case <-busy:
		case <-ctx.Done():
			var zero T
			return zero, ctx.Err()
		}
		s.mu.Lock()
	}
	busy := make(chan struct{})
	s.busy = busy
	gen := s.gen
	s.mu.Unlock()

	// The read outlives the caller that started it (a list page stops
	// waiting for its tab counts after tabWait and returns): it ends at
	// the caller's deadline, not at its cancellation, and is kept for
	// the next callers.
	fctx := context.WithoutCancel(ctx)
	if dl, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		fctx, cancel = context.WithDeadline(fctx, dl)
		defer cancel()
	}
	v, err := fetch(fctx)

	s.mu.Lock()
	defer s.mu.Unlock()
	if s.busy == busy {
		s.busy = nil
	}
	close(busy)
	if err == nil && gen == s.gen {
		s.val, s.at = v, time.Now()
	}
	return v, err
}

// getRecent is get, except that a value older than ttl but younger than
// maxAge, and kept since the last reset, is returned at once while one
// read (of at most refreshTimeout) replaces it in the background: a page
// never waits for a slow store's figures to refresh numbers it showed a
// moment ago. After a reset (an action) there is no such value, and the
// caller waits for a read as with get.
func (s *shared[T]) getRecent(ctx context.Context, ttl, maxAge time.Duration, fetch func(context.Context) (T, error)) (T, error) {
	s.mu.Lock()
	age := time.Since(s.at)
	if s.at.IsZero() || age < ttl || age >= maxAge {
		s.mu.Unlock()
		return s.get(ctx, ttl, fetch)
	}
	v := s.val
	if s.busy == nil {
		busy := make(chan struct{})
		s.busy = busy
		gen := s.gen
		go func() {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), refreshTimeout)
			defer cancel()
			nv, err := fetch(rctx)
			s.mu.Lock()
			defer s.mu.Unlock()
			if s.busy == busy {
				s.busy = nil
			}
			close(busy)
			if err == nil && gen == s.gen {
				s.val, s.at = nv, time.Now()
			}
		}()
	}
	s.mu.Unlock()
	return v, nil
}

// refreshTimeout bounds a background refresh of getRecent.
const refreshTimeout = 30 * time.Second

// reset drops the kept value and disowns any read in flight: that read
// answers only the caller that started it and is not kept, and every other
// caller, waiting or new, reads again.
func (s *shared[T]) reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.at = time.Time{}
	s.gen++
	// Callers that arrive from now on must not wait for a read that
	// started before the reset.
	s.busy = nil
}
