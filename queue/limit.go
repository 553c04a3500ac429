package queue

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/meridianjobs/meridian/queue/driver"
)

// KeyFunc picks the key a limit counts a job under. An empty key means the
// job is not limited.
type KeyFunc func(Job) string

// LimitKeyer is implemented by job types that name their own limit key
// (for example the API account a job calls on behalf of). See KeyFrom.
type LimitKeyer interface {
	LimitKey() string
}

// KeyFrom returns a KeyFunc that decodes the payload of jobs named for T
// and calls its LimitKey method. Jobs of other names (and payloads that do
// not decode) get no key, so they are not limited.
func KeyFrom[T LimitKeyer]() KeyFunc {
	name := NameOf[T]()
	return func(j Job) string {
		if j.Name != name {
			return ""
		}
		var v T
		if err := json.Unmarshal(j.Payload, &v); err != nil {
			return ""
		}
		return v.LimitKey()
	}
}

// KeyByQueue keys every job by its queue: a Concurrency limit over it caps
// the running jobs of each queue across the cluster.
func KeyByQueue(j Job) string { return "queue:" + j.QueueName() }

// KeyByName keys every job by its name (its type).
func KeyByName(j Job) string { return "name:" + j.Name }

// Limiter builds limit middleware whose state is in the store, so a limit
// holds across every process that shares it, not per process. It works
// over the queue's Leaser (every driver of this module is one): a limit of
// n is n named leases per key ("slots"), and a job runs only while it
// holds one. A job a limit stops is snoozed without counting an attempt or
// a snooze (SnoozeUncounted) to when a slot may be free; it is never
// failed by a limit.
//
// Slot leases are rows of the store's lease table (sqlqueue: the _meta
// table) and stay there, one per key and slot: keep the number of keys
// bounded (hash unbounded ones into buckets).
type Limiter struct {
	l   driver.Scheduler
	log *slog.Logger
}

// NewLimiter returns a Limiter over q. It returns an error matching
// ErrUnsupported when q has no Scheduler.
func NewLimiter(q Queue, log *slog.Logger) (*Limiter, error) {
	caps := driver.CapabilitiesOf(q)
	l := caps.Scheduler
	if l == nil {
		return nil, fmt.Errorf("queue: limits: %w", caps.Require("Scheduler"))
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Limiter{l: l, log: log}, nil
}

// slotName is the lease name of slot i of the limit kind on key: bounded
// in length whatever the key (MaxLeaseNameBytes).
func slotName(kind, key string, i int) string {
	h := sha256.Sum256([]byte(key))
	return "lim:" + kind + ":" + hex.EncodeToString(h[:10]) + ":" + strconv.Itoa(i)
}

// holderOf is the lease holder for one attempt of j: unique per attempt.
func holderOf(j Job) string {
	if j.LeaseToken == "" {
		return j.ID + ":" + driver.NewToken()
	}
	return j.ID + ":" + j.LeaseToken
}

// jitter returns d plus a random part of up to d.
func jitter(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return d + rand.N(d)
}

// Rate returns middleware that starts at most n jobs per key in any window
// of length per, across every process on the store (RateLimited in
// Laravel, Sidekiq's window limiter). Each start takes one of n slot
// leases for per (and a margin of up to 10 ms, a hundredth of per, for the
// store's round trip); a slot is never given back early, so two starts on
// one slot are at least per apart.
//
// Within a process the jobs of one key ask the store one at a time. A job
// that finds no slot waits in its handler for the next one to free when
// that is near (up to 100 ms in all), and is otherwise
// snoozed (uncounted) to about when its turn may come: a step (per/n) for
// each job of the key waiting in this process.
func (l *Limiter) Rate(key KeyFunc, n int, per time.Duration) (Middleware, error) {
	if key == nil || n < 1 || per <= 0 {
		return nil, fmt.Errorf("%w: Rate(key %v, n %d, per %s): want a key function, n >= 1 and per > 0", ErrLimit, key != nil, n, per)
	}
	step := max(per/time.Duration(n), 1) // one slot frees about every step
	probes := min(n, 2)
	margin := min(per/100, 10*time.Millisecond)
	// A job waits in its handler for a slot for up to nearWait in all,
	// so a key at its limit costs the store probes, not snoozes.
	const nearWait = 100 * time.Millisecond
	var mu sync.Mutex
	gates := map[string]*rateGate{}
	return func(next Handler) Handler {
		return func(ctx context.Context, j Job) error {
			k := key(j)
			if k == "" {
				return next(ctx, j)
			}
			mu.Lock()
			g := gates[k]
			if g == nil {
				g = &rateGate{sem: make(chan struct{}, 1), cursor: rand.N(n)}
				gates[k] = g
			}
			mu.Unlock()
			waiting := time.Duration(g.waiting.Add(1))
			defer g.waiting.Add(-1)
			// A snoozed job comes back after the jobs that wait here now
			// had their turns, about a step each.
			snooze := func(wait time.Duration) error {
				return SnoozeUncounted(max(wait, 0) + waiting*step + rand.N(step/4+1))
			}
			holder := holderOf(j)
			deadline := time.Now().Add(nearWait)
			for time.Now().Before(deadline) {
				select {
				case g.sem <- struct{}{}:
				case <-ctx.Done():
					return ctx.Err()
				}
				now := time.Now()
				if wait := g.until.Sub(now); wait > 0 {
					<-g.sem
					if wait > time.Until(deadline) {
						return snooze(wait)
					}
					if !sleepCtx(ctx, wait) {
						return ctx.Err()
					}
					continue
				}
				ok, err := l.takeRateSlot(ctx, g, k, holder, n, probes, per, margin)
				if !ok && err == nil {
					// The slots probed are taken: the next frees in
					// about a step.
					g.until = now.Add(step / 2)
				}
				<-g.sem
				if err != nil {
					return err
				}
				if ok {
					return next(ctx, j)
				}
			}
			select {
			case g.sem <- struct{}{}:
			case <-ctx.Done():
				return ctx.Err()
			}
			wait := time.Until(g.until)
			<-g.sem
			return snooze(wait)
		}
	}, nil
}

// rateGate makes the jobs of one key in one process ask the store one at
// a time (sem), and remembers until when every slot was found taken.
//
// The slots of a key are taken round the ring in order, so the slot after
// the last one taken is the one taken longest ago, the first to free:
// cursor is where this process probes next.
type rateGate struct {
	sem     chan struct{}
	until   time.Time // read and written while holding sem, as cursor
	cursor  int
	waiting atomic.Int32 // jobs in the middleware for this key
}

// takeRateSlot probes up to probes slots of key for holder from the
// gate's cursor on, moving it past each.
func (l *Limiter) takeRateSlot(ctx context.Context, g *rateGate, k, holder string, n, probes int, per, margin time.Duration) (bool, error) {
	for range probes {
		name := slotName("r", k, g.cursor)
		g.cursor = (g.cursor + 1) % n
		asked := time.Now()
		ok, err := l.l.AcquireLease(ctx, name, holder, per+margin)
		if err != nil {
			return false, fmt.Errorf("queue: rate limit %q: %w", k, err)
		}
		if !ok {
			continue
		}
		// The slot runs from about when the call was made; a call slower
		// than the margin (a lock wait) would start the job later than
		// the slot allows for, so it is held again from a later call,
		// until one is quick (a few tries).
		for try := 0; try < 5 && time.Since(asked) > margin; try++ {
			asked = time.Now()
			if _, err := l.l.AcquireLease(ctx, name, holder, per+margin); err != nil {
				return false, fmt.Errorf("queue: rate limit %q: %w", k, err)
			}
		}
		return true, nil
	}
	return false, nil
}

// Concurrency returns middleware that runs at most n jobs per key at once
// across every process on the store (Solid Queue's limits_concurrency;
// n = 1 is Laravel's WithoutOverlapping). A running job holds one of n slot
// leases, renewed while it runs and released when it returns; a holder
// that dies frees its slot after expiry. A job that finds every slot held
// is snoozed (uncounted) for retry plus jitter; retry <= 0 means one
// second.
//
// A slot has a deadline, as a job's lease has (Worker.LeaseMargin): its
// expiry as last stored minus a margin, the larger of DefaultLeaseMargin
// and a tenth of expiry, at most half of it. It is renewed every third of
// expiry minus the margin, each renewal with the deadline as its own; a
// holder whose renewals fail until the deadline, or that finds the slot
// taken, has its handler's context cancelled with cause ErrLeaseLost
// there, whatever the renewal is doing, and Holding reports the slot lost
// from then on.
//
// Per-queue concurrency is Concurrency(KeyByQueue, n, ...).
func (l *Limiter) Concurrency(key KeyFunc, n int, expiry, retry time.Duration) (Middleware, error) {
	if key == nil || n < 1 || expiry < time.Second {
		return nil, fmt.Errorf("%w: Concurrency(key %v, n %d, expiry %s): want a key function, n >= 1 and expiry >= 1s", ErrLimit, key != nil, n, expiry)
	}
	if retry <= 0 {
		retry = time.Second
	}
	margin := leaseMargin(expiry, 0)
	return func(next Handler) Handler {
		return func(ctx context.Context, j Job) error {
			k := key(j)
			if k == "" {
				return next(ctx, j)
			}
			holder := holderOf(j)
			first := rand.N(n)
			slot := ""
			var asked time.Time
			for p := range n {
				name := slotName("c", k, (first+p)%n)
				asked = time.Now()
				ok, err := l.l.AcquireLease(ctx, name, holder, expiry)
				if err != nil {
					return fmt.Errorf("queue: concurrency limit %q: %w", k, err)
				}
				if ok {
					slot = name
					break
				}
			}
			if slot == "" {
				return SnoozeUncounted(jitter(retry / 2))
			}
			held := newHold(ctx, asked.Add(expiry-margin), ErrLeaseLost)
			done := make(chan struct{})
			var renewer sync.WaitGroup
			renewer.Go(func() { l.renew(held, slot, holder, expiry, margin, done) })
			defer func() {
				close(done)
				held.stop(context.Canceled)
				renewer.Wait()
				rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
				defer cancel()
				if err := l.l.ReleaseLease(rctx, slot, holder); err != nil {
					l.log.Warn("queue: releasing a concurrency slot; it frees at its expiry", "key", k, "job", j.ID, "err", err)
				}
			}()
			return next(held, j)
		}
	}, nil
}

// renew keeps a concurrency slot held until done is closed, or until the
// hold ends: at its deadline (the slot's stored expiry minus the margin),
// or when a renewal finds the slot taken by another holder. Each renewal
// has the deadline as its own.
func (l *Limiter) renew(h *hold, slot, holder string, expiry, margin time.Duration, done chan struct{}) {
	t := time.NewTicker(max((expiry-margin)/3, time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-h.Done():
			return
		case <-t.C:
		}
		asked := time.Now()
		ctx, cancel := context.WithDeadline(context.WithoutCancel(h), h.endTime())
		ok, err := l.l.AcquireLease(ctx, slot, holder, expiry)
		cancel()
		switch {
		case err != nil:
			l.log.Warn("queue: renewing a concurrency slot failed; retrying until its expiry minus the margin", "slot", slot, "err", err)
		case !ok:
			l.log.Warn("queue: a concurrency slot was taken by another holder; cancelling the handler", "slot", slot)
			h.stop(ErrLeaseLost)
			return
		case !h.extend(asked.Add(expiry - margin)):
			l.log.Warn("queue: a concurrency slot was not renewed by its expiry minus the margin; cancelling the handler", "slot", slot, "margin", margin)
			return
		}
	}
}

// ThrottleErrors returns middleware that backs off a whole key after
// failures (Laravel's ThrottlesExceptions): once k attempts of the key's
// jobs have failed within window, across every process, no job of the key
// starts for backoff; they are snoozed (uncounted) instead. The failing
// attempts themselves are retried as usual. Failures are counted in k
// slot leases of length window; the backoff is one more lease.
func (l *Limiter) ThrottleErrors(key KeyFunc, k int, window, backoff time.Duration) (Middleware, error) {
	if key == nil || k < 1 || window <= 0 || backoff <= 0 {
		return nil, fmt.Errorf("%w: ThrottleErrors(key %v, k %d, window %s, backoff %s): want a key function, k >= 1, window and backoff > 0", ErrLimit, key != nil, k, window, backoff)
	}
	return func(next Handler) Handler {
		return func(ctx context.Context, j Job) error {
			key := key(j)
			if key == "" {
				return next(ctx, j)
			}
			block := slotName("tb", key, 0)
			// A probe of a microsecond takes a free block lease and lets
			// it lapse at once; a held one refuses it.
			free, err := l.l.AcquireLease(ctx, block, "probe:"+driver.NewToken(), time.Microsecond)
			if err != nil {
				return fmt.Errorf("queue: error throttle %q: %w", key, err)
			}
			if !free {
				return SnoozeUncounted(jitter(backoff / 4))
			}
			err = next(ctx, j)
			if err == nil || IsSnooze(err) || IsCancel(err) {
				return err
			}
			// Count the failure in the first free slot. Taking the last
			// one, or finding none free, means k failures within window:
			// block the key.
			bg := context.WithoutCancel(ctx)
			holder := holderOf(j)
			counted := -1
			for i := range k {
				ok, lerr := l.l.AcquireLease(bg, slotName("tf", key, i), holder, window)
				if lerr != nil {
					l.log.Warn("queue: counting a failure for the error throttle", "key", key, "err", lerr)
					return err
				}
				if ok {
					counted = i
					break
				}
			}
			if counted == -1 || counted == k-1 {
				if _, lerr := l.l.AcquireLease(bg, block, "blocked:"+holder, backoff); lerr != nil {
					l.log.Warn("queue: blocking a key for the error throttle", "key", key, "err", lerr)
				}
			}
			return err
		}
	}, nil
}
