package sqlqueue

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/meridianjobs/meridian/queue"
)

// maxWakeTimes bounds the future wake-up times a Queue remembers (see
// waker.at); beyond it the latest are dropped and the waiters' own max
// covers them.
const maxWakeTimes = 1024

// waker is the in-process wake-up behind Queue.Wait: a broadcast channel,
// closed and replaced on every signal, and the future times at which a
// job this process pushed or released becomes ready.
type waker struct {
	mu    sync.Mutex
	ch    chan struct{} // closed by the next signal; nil until a waiter asks
	times []time.Time   // sorted, at most maxWakeTimes
	timer *time.Timer   // fires at times[0]
}

// wait returns the channel the next signal closes.
func (w *waker) wait() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ch == nil {
		w.ch = make(chan struct{})
	}
	return w.ch
}

// signal wakes every current waiter.
func (w *waker) signal() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.signalLocked()
}

func (w *waker) signalLocked() {
	if w.ch != nil {
		close(w.ch)
		w.ch = nil
	}
}

// at wakes the waiters at t: now if t is not in the future.
func (w *waker) at(t time.Time) {
	if !time.Now().Before(t) {
		w.signal()
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	i, found := slices.BinarySearchFunc(w.times, t, time.Time.Compare)
	if found || i >= maxWakeTimes {
		return
	}
	w.times = slices.Insert(w.times, i, t)
	if len(w.times) > maxWakeTimes {
		w.times = w.times[:maxWakeTimes]
	}
	if i == 0 {
		w.resetLocked()
	}
}

// resetLocked points the timer at the earliest remembered time.
func (w *waker) resetLocked() {
	if w.timer != nil {
		w.timer.Stop()
		w.timer = nil
	}
	if len(w.times) > 0 {
		w.timer = time.AfterFunc(time.Until(w.times[0]), w.fire)
	}
}

// fire signals for every remembered time that has come.
func (w *waker) fire() {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := time.Now()
	n := 0
	for n < len(w.times) && !now.Before(w.times[n]) {
		n++
	}
	if n == 0 {
		return // a timer replaced by resetLocked after it had fired
	}
	w.times = slices.Delete(w.times, 0, n)
	w.signalLocked()
	w.resetLocked()
}

// Wait implements driver.Waiter within one process: it returns nil at once
// when one of queues (not paused) has a ready job, else when a job pushed
// or released through this Queue value may have become ready (a Push or
// PushMany, a retry or snooze through Complete, RetryDead or Resume; a job
// pushed or released for later wakes it when that time comes), or after max. A push
// from another process, or through Tx (visible only at its commit), is
// seen at the next call after max: keep the Worker's Poll as the bound on
// that delay. ctx's error when ctx is done. A wake-up may be spurious.
//
// sqlqueue/postgres replaces this method with one that also hears other
// processes' pushes (LISTEN/NOTIFY).
func (q *Queue) Wait(ctx context.Context, queues []string, max time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	// Subscribe before looking, so a push between the look and the wait
	// is not missed.
	woken := q.wake.wait()
	ready, err := q.hasReady(ctx, queues)
	if err != nil {
		return q.wrap(ctx, err, "looking for ready jobs")
	}
	if ready {
		return nil
	}
	t := time.NewTimer(max)
	defer t.Stop()
	select {
	case <-woken:
		return nil
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// hasReady reports whether one of queues that is not paused has a ready
// job.
func (q *Queue) hasReady(ctx context.Context, queues []string) (bool, error) {
	if err := q.use(ctx); err != nil {
		return false, err
	}
	if len(queues) == 0 {
		queues = []string{queue.DefaultQueue}
	}
	var one int
	now := micros(time.Now())
	query, args, err := q.stmtIn(qHasReady, queues, now, now)
	if err != nil {
		return false, err
	}
	err = queryRow(ctx, stmts(q.db), query, args, &one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}
