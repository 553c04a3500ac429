package sqlqueue

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// vacuumAfterAcks is how many jobs this Queue acks between two background
// checks of whether the jobs table needs a vacuum (dialect.vacuumIfDue).
// An acked row's index entries stay in the claim index until a vacuum
// removes them, and every claim walks past them: where autovacuum is off,
// or lags behind a fast burn-down, the claim's cost grows with the jobs
// done since the last vacuum, while the maintenance pass checks only once
// per interval; vacuums during a long burn-down keep its claims short.
// A small queue never
// reaches this count, so tests never vacuum.
const vacuumAfterAcks = 100_000

// vacuumTimeout bounds one background vacuum.
const vacuumTimeout = 5 * time.Minute

// vacuumer runs the background vacuum checks of one Queue: at most one at
// a time, waited for by Close.
type vacuumer struct {
	// after and deadRows replace vacuumAfterAcks and vacuumDeadRows when
	// not zero (tests; a negative deadRows vacuums whatever the count).
	after, deadRows int64

	acked   atomic.Int64
	running atomic.Bool
	wg      sync.WaitGroup
	mu      sync.Mutex
	cancel  context.CancelFunc // of the running check; nil when none
	closed  bool
}

// acked counts n jobs acked and, every vacuumAfterAcks of them, starts a
// background check unless one is running.
func (q *Queue) countAcked(n int) {
	v := &q.vac
	after := int64(vacuumAfterAcks)
	if v.after > 0 {
		after = v.after
	}
	if n <= 0 || v.acked.Add(int64(n)) < after || !v.running.CompareAndSwap(false, true) {
		return
	}
	v.acked.Store(0)
	v.mu.Lock()
	if v.closed {
		v.mu.Unlock()
		v.running.Store(false)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), vacuumTimeout)
	v.cancel = cancel
	v.wg.Add(1)
	v.mu.Unlock()
	go func() {
		defer v.wg.Done()
		defer v.running.Store(false)
		defer cancel()
		if err := q.d.vacuumIfDue(ctx, q); err != nil && ctx.Err() == nil {
			q.log.Warn("sqlqueue: vacuuming the jobs table after many acks failed; the maintenance pass tries again", "table", q.t.raw, "err", err)
		}
	}()
}

// vacuumDeadRows returns the dead rows from which vacuumIfDue vacuums.
func (v *vacuumer) minDeadRows() int64 {
	if v.deadRows != 0 {
		return v.deadRows
	}
	return vacuumDeadRows
}

// closeVacuum stops a running background check and waits for it.
func (q *Queue) closeVacuum() {
	v := &q.vac
	v.mu.Lock()
	v.closed = true
	if v.cancel != nil {
		v.cancel()
	}
	v.mu.Unlock()
	v.wg.Wait()
}
