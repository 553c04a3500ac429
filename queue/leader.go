package queue

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/meridianjobs/meridian/queue/driver"
)

// The default margin of a Leader (LeaderMargin) is a tenth of the TTL.
const defaultMarginDiv = 10

// Leader campaigns for one named lease and keeps it renewed while it holds
// it: leader election over any driver that implements Leaser. Create it with
// NewLeader and call Run; many processes run a Leader for the same name and
// at most one of them leads at a time. A holder that dies (killed, cut off
// from the store) is replaced within the TTL plus one renew interval.
//
// # Terms and what is guaranteed
//
// Each election starts a term: OnElected runs with a context that carries
// the term's Fence (see LeaderEpoch) and ends, with cause
// ErrLeadershipLost, at the stored expiry of the lease minus a margin
// (LeaderMargin) unless a renewal stored a later expiry first. Every store
// call has that point as its deadline, and a timer ends the term there
// whatever the call is doing, so a leader cut off from the store (a frozen
// connection, a locked database) stops before any other process can take
// over. The margin is the time user code has to notice the end of the term
// and stop, and it absorbs clock skew between processes.
//
// A process that is paused (SIGSTOP, a suspended VM) cannot be stopped from
// inside: it may be in the middle of a leader action when another process
// takes over. When it resumes, its term is already over for the OnElected
// context (Err and Leading read the clock) and the store refuses the
// fenced writes it makes with the old epoch (ErrFenced): periodic tick
// claims under the term's context, sqlqueue's maintenance pass, and the
// alert claims of observe/alert. Writes user code makes elsewhere are not
// fenced by the store: pass LeaderEpoch along and have the other system
// refuse a lower epoch than one it has seen, or call Leading just before
// each action (which narrows the window, but cannot close it).
type Leader struct {
	l      driver.Scheduler
	name   string
	holder string
	ttl    time.Duration
	renew  time.Duration
	margin time.Duration
	log    *slog.Logger

	onElected func(ctx context.Context)
	onLost    func()

	mu      sync.Mutex
	leading bool
	fence   driver.Fence
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

// LeaderMargin sets how long before the stored expiry of its lease a
// leader that could not renew ends its term (default a tenth of the TTL).
// The renew interval plus the margin must be shorter than the TTL.
func LeaderMargin(d time.Duration) LeaderOption { return func(l *Leader) { l.margin = d } }

// LeaderHolder sets the identity stored as the lease's holder (default a
// new random ID per Leader).
func LeaderHolder(id string) LeaderOption { return func(l *Leader) { l.holder = id } }

// LeaderLogger sets the logger for renewals that fail (default
// slog.Default()).
func LeaderLogger(log *slog.Logger) LeaderOption { return func(l *Leader) { l.log = log } }

// OnElected calls fn, on a goroutine of its own, each time this Leader
// becomes the leader. fn's context carries the term's Fence (LeaderEpoch,
// FenceFrom) and is cancelled when the term ends (lost, not renewed by the
// margin before the stored expiry, released, or Run's context done); Run
// waits for fn to return before it starts another term or returns.
func OnElected(fn func(ctx context.Context)) LeaderOption {
	return func(l *Leader) { l.onElected = fn }
}

// OnLost calls fn each time this Leader stops being the leader, after the
// term's OnElected function returned.
func OnLost(fn func()) LeaderOption { return func(l *Leader) { l.onLost = fn } }

// ErrLeaderConfig reports a Leader whose options cannot work.
var errLeaderConfig = fmt.Errorf("%w: leader", ErrConfig)

// NewLeader returns a Leader for the lease name on q. It returns an error
// matching ErrUnsupported when q cannot hold leases, and one matching
// ErrConfig for a name ValidateLeaseName refuses or timings that cannot
// work (the renew interval plus the margin not shorter than the TTL).
func NewLeader(q Queue, name string, opts ...LeaderOption) (*Leader, error) {
	caps := driver.CapabilitiesOf(q)
	ls := caps.Scheduler
	if ls == nil {
		return nil, fmt.Errorf("queue: leader %q: %w", name, caps.Require("Scheduler"))
	}
	l := &Leader{l: ls, name: name, holder: driver.NewID(), ttl: DefaultLeaderTTL, margin: -1, changed: make(chan struct{})}
	for _, o := range opts {
		o(l)
	}
	if l.renew <= 0 {
		l.renew = l.ttl / 3
	}
	if l.margin < 0 {
		l.margin = l.ttl / defaultMarginDiv
	}
	if err := driver.ValidateLeaseName(name); err != nil {
		return nil, err
	}
	if l.ttl <= 0 || l.renew <= 0 || l.renew+l.margin >= l.ttl {
		return nil, fmt.Errorf("%w %q: the renew interval (%s) must be positive and, plus the margin (%s), shorter than the TTL (%s)", errLeaderConfig, name, l.renew, l.margin, l.ttl)
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

// Fence returns the Fence of the current term and true while this Leader
// leads. Writes made under WithFence(ctx, f) are refused by the stores
// that check fences once another term began.
func (l *Leader) Fence() (driver.Fence, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.fence, l.leading
}

// Changed returns a channel that is closed at the next change of
// leadership (elected or lost); call it again after each change.
func (l *Leader) Changed() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.changed
}

// attempt is the outcome of one AcquireLeaseEpoch call.
type attempt struct {
	start time.Time
	epoch int64
	held  bool
	err   error
}

// Run campaigns until ctx is done: it tries to take the lease every renew
// interval, renews it while it holds it, and releases it when ctx is done
// (so a follower takes over at once after a clean shutdown). It returns
// ctx's error. Errors of the store are logged and retried at the next
// interval. Each store call has the end of the current term as its
// deadline, and the term ends then whether or not the call returned.
func (l *Leader) Run(ctx context.Context) error {
	var (
		cur      *term // the current term, nil when not leading
		elected  sync.WaitGroup
		inflight chan attempt // the store call under way, nil if none
	)
	end := time.NewTimer(0) // the end of the current term
	end.Stop()
	defer end.Stop()
	endTerm := func(cause error) {
		if cur == nil {
			return
		}
		end.Stop()
		cur.stop(cause)
		elected.Wait()
		cur = nil
		if l.set(false, driver.Fence{}) && l.onLost != nil {
			l.onLost()
		}
	}
	next := time.NewTimer(0) // the next store call
	defer next.Stop()
	for {
		select {
		case <-ctx.Done():
			endTerm(ctx.Err())
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.renew)
			if inflight != nil {
				// A call that takes the lease after the release would
				// hold it for a Leader that is gone.
				select {
				case <-inflight:
				case <-rctx.Done():
				}
			}
			if err := l.l.ReleaseLease(rctx, l.name, l.holder); err != nil {
				l.log.Warn("queue: releasing the leader lease failed; it expires on its own", "lease", l.name, "err", err)
			}
			cancel()
			return ctx.Err()
		case <-end.C:
			// No renewal stored a later expiry in time.
			l.log.Warn("queue: the leader lease was not renewed in time; leadership ends", "lease", l.name, "margin", l.margin)
			endTerm(ErrLeadershipLost)
		case <-next.C:
			if inflight != nil {
				// The last call has not returned: its deadline, or the
				// term's end, settles it.
				next.Reset(l.renew)
				continue
			}
			start := time.Now()
			deadline := start.Add(l.ttl - l.margin)
			if cur != nil {
				deadline = cur.endTime()
			}
			inflight = make(chan attempt, 1)
			go func(done chan<- attempt) {
				actx, cancel := context.WithDeadline(ctx, deadline)
				defer cancel()
				epoch, held, err := l.l.AcquireLeaseEpoch(actx, l.name, l.holder, l.ttl)
				done <- attempt{start: start, epoch: epoch, held: held, err: err}
			}(inflight)
			next.Reset(l.renew)
		case a := <-inflight:
			inflight = nil
			termEnd := a.start.Add(l.ttl - l.margin)
			switch {
			case a.err != nil:
				if ctx.Err() == nil {
					l.log.Warn("queue: renewing the leader lease failed; retrying", "lease", l.name, "err", a.err)
				}
			case !a.held || !time.Now().Before(termEnd):
				endTerm(ErrLeadershipLost)
			case cur != nil && cur.fence.Epoch == a.epoch && cur.extend(termEnd):
				end.Reset(time.Until(termEnd))
			default:
				// Elected, or re-elected under a new epoch after the
				// lease was lost without this Leader seeing it.
				endTerm(ErrLeadershipLost)
				f := driver.Fence{Lease: l.name, Epoch: a.epoch}
				cur = newTerm(ctx, f, termEnd)
				end.Reset(time.Until(termEnd))
				l.set(true, f)
				if l.onElected != nil {
					t := cur
					elected.Go(func() { l.onElected(t) })
				}
			}
		}
	}
}

// set records leadership and reports whether it changed.
func (l *Leader) set(leading bool, f driver.Fence) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.fence = f
	if l.leading == leading {
		return false
	}
	l.leading = leading
	close(l.changed)
	l.changed = make(chan struct{})
	return true
}
