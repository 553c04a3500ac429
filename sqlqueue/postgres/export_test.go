package postgres

// PushCopy exposes the COPY path to the external benchmark, which loads
// batches below copyMin with it too to choose copyMin.
var PushCopy = (*Queue).pushCopy

// ErrConflict is the COPY path's signal to fall back to the INSERT.
var ErrConflict = errConflict

// Waiting reports how many Waits of q are registered with its listener.
func Waiting(q *Queue) int {
	q.l.mu.Lock()
	defer q.l.mu.Unlock()
	return len(q.l.waiters)
}

// PingChannel is the channel q's listener sends its self-notifications on.
func PingChannel(q *Queue) string { return q.l.ping }

// NextRunAt is the listener's due-time lookup, DuePaused its answer for a
// paused queue.
var NextRunAt = (*Queue).nextRunAt

const DuePaused = duePaused
