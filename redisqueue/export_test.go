package redisqueue

import "time"

// SetBatchHook makes q run hook at the end of each step of the batch
// protocol (scripts_batch.go); an error stops the protocol there, as a
// process killed at that point would.
func SetBatchHook(q *Queue, hook func(step string) error) { q.batchSweep.hook = hook }

// SetGraphRetention sets how long q keeps a graph's keys once it has
// finished.
func SetGraphRetention(q *Queue, d time.Duration) { q.batchSweep.graphKeep = d }

// SetSweepEvery sets how often q's reservations look in a queue's outbox.
func SetSweepEvery(q *Queue, d time.Duration) { q.batchSweep.every = d }

// MetricsFlushes is how many writes of q's buffered run metrics were made.
func MetricsFlushes(q *Queue) int {
	q.report.mu.Lock()
	defer q.report.mu.Unlock()
	return q.report.flushes
}

// MetricsKeys are the hashes that hold queue name's per-minute and hourly
// points at t.
func MetricsKeys(q *Queue, name string, t time.Time) (minute, hourly string) {
	m, _, _ := q.pointHash(metricKey{span: 60, at: t.Unix() - mod(t.Unix(), 60), queue: name})
	h, _, _ := q.pointHash(metricKey{span: 3600, at: t.Unix() - mod(t.Unix(), 3600), queue: name})
	return m, h
}

// SetWaitBlocked makes each Wait on q that found nothing due call f just
// before it blocks. Set it before q's first Wait.
func SetWaitBlocked(q *Queue, f func()) { q.waker.blocked = f }
