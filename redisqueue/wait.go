package redisqueue

import (
	"context"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// waker delivers the wake-up channel's messages to the Waits of one
// Queue. Every script that makes a job ready now publishes the job's
// queue name on the prefix's channel ({prefix}:wake); the Queue holds one
// subscription, opened at its first Wait, and hands each message to the
// Waits on that queue. A Wait registers before it looks at the queues,
// and the subscription is confirmed before the first look, so a push
// between the look and the block is not missed. A job that comes due by
// its time (scheduled, retried later, a lease that expires) publishes
// nothing: Wait sleeps until the earliest of those times instead.
type waker struct {
	q *Queue

	mu      sync.Mutex
	ps      *redis.PubSub
	done    chan struct{} // closed when the delivery goroutine ends
	closed  bool
	waiters map[*waiter]struct{}

	// blocked, set by tests before the first Wait, runs in each Wait
	// that found nothing due and is about to block.
	blocked func()
}

type waiter struct {
	queues []string
	ch     chan struct{}
}

// subscribe opens the subscription if it is not open.
func (w *waker) subscribe(ctx context.Context) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return redis.ErrClosed
	}
	if w.ps != nil {
		return nil
	}
	// The subscription outlives the Wait that opened it: its context is
	// ctx's values without ctx's end; the confirmation is awaited under
	// ctx itself.
	ps := w.q.rdb.Subscribe(context.WithoutCancel(ctx), w.q.wake)
	if _, err := ps.Receive(ctx); err != nil {
		ps.Close()
		return err
	}
	w.ps = ps
	w.done = make(chan struct{})
	ch := ps.Channel()
	go func() {
		defer close(w.done)
		for m := range ch {
			w.deliver(m.Payload)
		}
	}()
	return nil
}

// deliver wakes the waiters on queue name.
func (w *waker) deliver(name string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for wt := range w.waiters {
		for _, n := range wt.queues {
			if n == name {
				select {
				case wt.ch <- struct{}{}:
				default:
				}
				break
			}
		}
	}
}

func (w *waker) add(queues []string) *waiter {
	wt := &waiter{queues: queues, ch: make(chan struct{}, 1)}
	w.mu.Lock()
	if w.waiters == nil {
		w.waiters = map[*waiter]struct{}{}
	}
	w.waiters[wt] = struct{}{}
	if w.closed {
		wt.ch <- struct{}{} // closed while this Wait subscribed
	}
	w.mu.Unlock()
	return wt
}

func (w *waker) remove(wt *waiter) {
	w.mu.Lock()
	delete(w.waiters, wt)
	w.mu.Unlock()
}

// close ends the subscription, waits for its goroutine and wakes the
// Waits in progress (a spurious wake-up; their next Wait fails).
func (w *waker) close() {
	w.mu.Lock()
	w.closed = true
	ps, done := w.ps, w.done
	w.ps = nil
	for wt := range w.waiters {
		select {
		case wt.ch <- struct{}{}:
		default:
		}
	}
	w.mu.Unlock()
	if ps != nil {
		ps.Close()
		<-done
	}
}

// Wait returns nil when a job may have become ready on one of queues, or
// when max has elapsed, and ctx's error when ctx is done (see
// queue.Waiter). A push, retry or dead-letter retry that makes a job
// ready wakes it through pub/sub, and so does the end of a sequence's
// head (ack, cancel, ForgetDead, FlushDead, Purge, a release) that makes
// the next member ready; a job that comes due by its time wakes
// it by a timer set to the earliest due time of the queues' scheduled
// jobs and leases. A paused queue has nothing due; Resume wakes its
// Waits. Messages published while the subscription reconnects are lost:
// max bounds how late such a wake-up comes.
func (q *Queue) Wait(ctx context.Context, queues []string, max time.Duration) error {
	const doing = "waiting for jobs"
	if err := ctxErr(ctx, doing); err != nil {
		return err
	}
	if len(queues) == 0 {
		queues = defaultQueues
	}
	if err := q.waker.subscribe(ctx); err != nil {
		return wrap(doing, err)
	}
	wt := q.waker.add(queues)
	defer q.waker.remove(wt)
	due, err := q.nextDue(ctx, queues)
	if err != nil {
		return wrap(doing, err)
	}
	if due <= 0 {
		return nil
	}
	timer := time.NewTimer(min(max, due))
	defer timer.Stop()
	if q.waker.blocked != nil {
		q.waker.blocked()
	}
	select {
	case <-wt.ch:
		return nil
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctxErr(ctx, doing)
	}
}

// nextDue returns how long until a job of queues may be ready: 0 when one
// is, a very long time when none is ready, scheduled or leased. A paused
// queue has nothing due: its Resume publishes a wake-up.
func (q *Queue) nextDue(ctx context.Context, queues []string) (time.Duration, error) {
	pipe := q.rdb.Pipeline()
	now := pipe.Time(ctx)
	type probe struct {
		paused            *redis.IntCmd
		ready, sched, run *redis.ZSliceCmd
	}
	probes := make([]probe, len(queues))
	for i, n := range queues {
		b := q.base(n)
		probes[i] = probe{
			paused: pipe.Exists(ctx, b+":paused"),
			ready:  pipe.ZRangeWithScores(ctx, b+":ready", 0, 0),
			sched:  pipe.ZRangeWithScores(ctx, b+":sched", 0, 0),
			run:    pipe.ZRangeWithScores(ctx, b+":run", 0, 0),
		}
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return 0, err
	}
	nowMs := now.Val().UnixMilli()
	next := int64(-1)
	for _, p := range probes {
		if p.paused.Val() > 0 {
			continue // nothing is due until Resume, which wakes the Wait
		}
		if len(p.ready.Val()) > 0 {
			return 0, nil
		}
		for _, c := range []*redis.ZSliceCmd{p.sched, p.run} {
			if v := c.Val(); len(v) > 0 {
				at := int64(v[0].Score)
				if next < 0 || at < next {
					next = at
				}
			}
		}
	}
	if next < 0 {
		return time.Duration(1<<63 - 1), nil
	}
	if next <= nowMs {
		return 0, nil
	}
	return time.Duration(next-nowMs) * time.Millisecond, nil
}
