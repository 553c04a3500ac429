package queue

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// Default timings of a Leader.
const (
	DefaultLeaderTTL = 15 * time.Second
)

// Leader campaigns for one named lease and keeps it renewed while it holds
// it: leader election over any driver that implements Leaser. Create it with
// NewLeader and call Run; many processes run a Leader for the same name and
// at most one of them leads at a time. A holder that dies (killed, cut off
// from the store) is replaced within the TTL plus one renew interval.
//
// A leader that cannot renew its lease before it expires (the store is
// unreachable, the process stalled) stops leading at the expiry it last
// stored, before any other process can take over: work done while leading
// should watch the context OnElected gives.
type Leader struct {
	l      Leaser
	name   string
	holder string
	ttl    time.Duration
	renew  time.Duration
	log    *slog.Logger

	onElected func(ctx context.Context)
	onLost    func()

	mu      sync.Mutex
	leading bool
	changed chan struct{}
}

// LeaderOption configures a Leader.
type LeaderOption func(*Leader)

// LeaderTTL sets how long one acquisition holds the lease (default
// DefaultLeaderTTL). The renew interval defaults to a third of it.
func LeaderTTL(d time.Duration) LeaderOption { return func(l *Leader) { l.ttl = d } }

// LeaderRenew sets how often the leader renews its lease and a follower
// tries to take it (default a third of the TTL). It must be shorter than
// the TTL.
func LeaderRenew(d time.Duration) LeaderOption { return func(l *Leader) { l.renew = d } }

// LeaderHolder sets the identity stored as the lease's holder (default a
// new random ID per Leader).
func LeaderHolder(id string) LeaderOption { return func(l *Leader) { l.holder = id } }

// LeaderLogger sets the logger for renewals that fail (default
// slog.Default()).
func LeaderLogger(log *slog.Logger) LeaderOption { return func(l *Leader) { l.log = log } }

// OnElected calls fn, on a goroutine of its own, each time this Leader
// becomes the leader. fn's context is cancelled when leadership ends (lost,
// released, or Run's context done); Run waits for fn to return before it
// returns.
func OnElected(fn func(ctx context.Context)) LeaderOption {
	return func(l *Leader) { l.onElected = fn }
}

// OnLost calls fn each time this Leader stops being the leader.
func OnLost(fn func()) LeaderOption { return func(l *Leader) { l.onLost = fn } }

// ErrLeaderConfig reports a Leader whose options cannot work.
var errLeaderConfig = fmt.Errorf("%w: leader", ErrConfig)

// NewLeader returns a Leader for the lease name on q. It returns an error
// matching ErrUnsupported when q cannot hold leases, and one matching
// ErrConfig for an empty name or a renew interval not shorter than the TTL.
func NewLeader(q Queue, name string, opts ...LeaderOption) (*Leader, error) {
	ls, ok := q.(Leaser)
	if !ok {
		return nil, fmt.Errorf("queue: leader %q: %T cannot hold leases: %w", name, q, ErrUnsupported)
	}
	l := &Leader{l: ls, name: name, holder: NewID(), ttl: DefaultLeaderTTL, changed: make(chan struct{})}
	for _, o := range opts {
		o(l)
	}
	if l.renew <= 0 {
		l.renew = l.ttl / 3
	}
	if err := ValidateLeaseName(name); err != nil {
		return nil, err
	}
	switch {
	case l.ttl <= 0 || l.renew >= l.ttl:
		return nil, fmt.Errorf("%w %q: the renew interval (%s) must be positive and shorter than the TTL (%s)", errLeaderConfig, name, l.renew, l.ttl)
	}
	if l.log == nil {
		l.log = slog.Default()
	}
	return l, nil
}

// Name returns the lease's name.
func (l *Leader) Name() string { return l.name }

// Holder returns the identity this Leader holds the lease under.
func (l *Leader) Holder() string { return l.holder }

// IsLeader reports whether this Leader holds the lease now.
func (l *Leader) IsLeader() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.leading
}

// Changed returns a channel that is closed at the next change of
// leadership (elected or lost); call it again after each change.
func (l *Leader) Changed() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.changed
}

// Run campaigns until ctx is done: it tries to take the lease every renew
// interval, renews it while it holds it, and releases it when ctx is done
// (so a follower takes over at once after a clean shutdown). It returns
// ctx's error. Errors of the store are logged and retried at the next
// interval; a leader that cannot renew steps down when its last stored
// expiry passes.
func (l *Leader) Run(ctx context.Context) error {
	var (
		until   time.Time // expiry of the lease as last stored
		stop    context.CancelFunc
		elected sync.WaitGroup
	)
	stepDown := func() {
		if stop != nil {
			stop()
			elected.Wait()
			stop = nil
		}
		if l.set(false) && l.onLost != nil {
			l.onLost()
		}
	}
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			stepDown()
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.renew)
			if err := l.l.ReleaseLease(rctx, l.name, l.holder); err != nil {
				l.log.Warn("queue: releasing the leader lease failed; it expires on its own", "lease", l.name, "err", err)
			}
			cancel()
			return ctx.Err()
		case <-t.C:
		}
		start := time.Now()
		held, err := l.l.AcquireLease(ctx, l.name, l.holder, l.ttl)
		switch {
		case err != nil && ctx.Err() == nil:
			l.log.Warn("queue: renewing the leader lease failed; retrying", "lease", l.name, "err", err)
			if l.IsLeader() && !time.Now().Before(until) {
				stepDown()
			}
		case err != nil:
		case held:
			until = start.Add(l.ttl)
			if l.set(true) && l.onElected != nil {
				stop = l.elected(ctx, &elected)
			}
		default:
			stepDown()
		}
		next := l.renew
		if l.IsLeader() {
			// Never sleep past the stored expiry without a renewal try.
			next = min(next, max(time.Until(until), 0))
		}
		t.Reset(next)
	}
}

// elected starts OnElected's function under a context of its own and
// returns the function that cancels it.
func (l *Leader) elected(ctx context.Context, wg *sync.WaitGroup) context.CancelFunc {
	ectx, cancel := context.WithCancel(ctx)
	wg.Go(func() { l.onElected(ectx) })
	return cancel
}

// set records leadership and reports whether it changed.
func (l *Leader) set(leading bool) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.leading == leading {
		return false
	}
	l.leading = leading
	close(l.changed)
	l.changed = make(chan struct{})
	return true
}
