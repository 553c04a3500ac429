package memqueue

import (
	"context"
	"fmt"
	"maps"
	"time"

	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// Amend changes the job id as a says (see driver.Controller) under the
// queue's lock. AmendRetry pushes the job again under its ID (Push's rule
// for a dead letter or a retained finished job), so a done or cancelled
// job is found only while WithRetention keeps it; its history moves with
// it.
func (q *Queue) Amend(ctx context.Context, id string, a driver.Amendment) (driver.JobState, error) {
	doing := fmt.Sprintf("amending job %s (%s)", id, a.Op)
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("memqueue: %s: %w", doing, err)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	e := q.jobs[id]
	if e == nil {
		return "", fmt.Errorf("memqueue: %s: %w", doing, queue.ErrNotFound)
	}
	now := q.now()
	e.nq.promote(now.UnixNano(), now)
	was := e.state
	switch {
	case a.From != "" && was != a.From:
		return "", fmt.Errorf("memqueue: %s: the job is %s, not %s: %w", doing, was, a.From, driver.ErrJobState)
	case a.Op == driver.AmendNote:
	case a.Op == driver.AmendRunNow && was == queue.StateScheduled:
		e.nq.scheduled.remove(e.idx)
		e.job.AvailableAt, e.avail, e.updatedAt = now, now.UnixNano(), now
		q.enqueueLocked(e, e.avail)
	case a.Op == driver.AmendRetry && retryable(e):
		j := e.job
		if a.Payload != nil {
			j.Payload = a.Payload
		}
		if _, ok := j.Meta[driver.MetaSequence]; ok && q.seatOfLocked(e).s == nil {
			// It left its sequence (done, cancelled, released): the
			// retry runs outside it, as on every store.
			j.Meta = maps.Clone(j.Meta)
			delete(j.Meta, driver.MetaSequence)
			delete(j.Meta, driver.MetaSequenceRelease)
		}
		j.AvailableAt = now
		if err := driver.Validate(j); err != nil {
			return "", err
		}
		if err := q.pushLocked(j, now); err != nil {
			return "", fmt.Errorf("memqueue: %s: %w", doing, err)
		}
		n := q.jobs[id]
		n.history, n.startedAt, n.worker = e.history, e.startedAt, e.worker
		e = n
	default:
		return "", fmt.Errorf("memqueue: %s: the job is %s: %w", doing, was, driver.ErrJobState)
	}
	e.acted(a.Action, now)
	return was, nil
}

// retryable reports whether AmendRetry applies to e: a dead letter, or a
// cancelled or done job that was not a batch member.
func retryable(e *entry) bool {
	switch e.state {
	case queue.StateDead:
		return true
	case queue.StateDone, queue.StateCancelled:
		return e.job.Meta[driver.MetaBatch] == ""
	}
	return false
}

// acted records a in e's history, at now when a.At is zero, keeping the
// last driver.MaxHistory actions.
func (e *entry) acted(a driver.Action, now time.Time) {
	a = a.Dated(now)
	if e.history == nil {
		e.history = new(notes)
	}
	h := e.history.actions
	if len(h) == driver.MaxHistory {
		h = append(h[:0], h[1:]...)
	}
	e.history.actions = append(h, a)
}
