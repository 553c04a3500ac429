package memqueue

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// maxCancelLog bounds the cancels of running jobs kept for CancelledSince.
const maxCancelLog = 4096

// cancelRecord is one cancel of a running job.
type cancelRecord struct {
	lease driver.Lease
	at    time.Time
}

// lease is one named lease (see queue.Leaser). A released lease stays, with
// no holder, so that its epoch keeps growing.
type lease struct {
	holder  string
	expires time.Time
	epoch   int64
}

// AcquireLease takes or renews the named lease for holder (see
// queue.Leaser). Leases live in this Queue's memory, so they elect a leader
// among the users of one Queue value.
func (q *Queue) AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (bool, error) {
	_, held, err := q.AcquireLeaseEpoch(ctx, name, holder, ttl)
	return held, err
}

// AcquireLeaseEpoch is AcquireLease that also returns the lease's epoch
// (see queue.Leaser).
func (q *Queue) AcquireLeaseEpoch(ctx context.Context, name, holder string, ttl time.Duration) (int64, bool, error) {
	if err := ctx.Err(); err != nil {
		return 0, false, fmt.Errorf("memqueue: acquiring lease %s: %w", name, err)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.now()
	l := q.leases[name]
	live := l.holder != "" && l.expires.After(now)
	if live && l.holder != holder {
		return 0, false, nil
	}
	if !live || l.holder != holder {
		l.epoch++
	}
	l.holder, l.expires = holder, now.Add(ttl)
	q.leases[name] = l
	return l.epoch, true, nil
}

// ReleaseLease gives up the named lease if holder holds it.
func (q *Queue) ReleaseLease(ctx context.Context, name, holder string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memqueue: releasing lease %s: %w", name, err)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if l, ok := q.leases[name]; ok && l.holder == holder {
		q.leases[name] = lease{epoch: l.epoch}
	}
	return nil
}

// fencedLocked returns an error matching queue.ErrFenced when ctx carries a
// Fence (driver.WithFence) whose epoch is no longer its lease's.
func (q *Queue) fencedLocked(ctx context.Context) error {
	f, ok := driver.FenceFrom(ctx)
	if !ok || q.leases[f.Lease].epoch == f.Epoch {
		return nil
	}
	return fmt.Errorf("lease %s is past epoch %d: %w", f.Lease, f.Epoch, queue.ErrFenced)
}

// Cancel cancels the active job id (see driver.Controller). The cancelled job
// is kept among the retained finished jobs (WithRetention), as an acked one
// is. A batch member counts as cancelled in its batch, which pushes the
// callbacks that this makes due.
func (q *Queue) Cancel(ctx context.Context, id string) (driver.JobState, error) {
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("memqueue: cancelling job %s: %w", id, err)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	e := q.jobs[id]
	if e == nil {
		return "", fmt.Errorf("memqueue: cancelling job %s: %w", id, queue.ErrNotFound)
	}
	now := q.now()
	was, ok := q.cancelLocked(e, now)
	if !ok {
		return "", fmt.Errorf("memqueue: cancelling job %s: %w", id, queue.ErrFinished)
	}
	q.memberCancelledLocked(e, now)
	q.nodeCancelledLocked(e, now)
	return was, nil
}

// cancelLocked cancels e if it is active and reports where it was; ok is
// false (and nothing changes) when it had finished.
func (q *Queue) cancelLocked(e *entry, now time.Time) (was driver.JobState, ok bool) {
	nq := e.nq
	nq.promote(now.UnixNano(), now)
	was = e.state
	switch was {
	case queue.StateReady:
		nq.ready.remove(e)
	case queue.StateScheduled:
		nq.scheduled.remove(e.idx)
	case driver.StateGrouped:
		nq.ungroupLocked(e)
	case driver.StateSequenced:
		// retireLocked below takes it out of its sequence.
	case queue.StateRunning:
		nq.running.remove(e.idx)
		q.cancels = append(q.cancels, cancelRecord{lease: e.job.Lease(), at: now})
		if len(q.cancels) > maxCancelLog {
			q.cancels = append(q.cancels[:0], q.cancels[len(q.cancels)-maxCancelLog/2:]...)
		}
	default:
		return "", false
	}
	e.job.LastError = queue.ErrCancelled.Error()
	q.retireLocked(e, queue.StateCancelled, now)
	return was, true
}

// CancelledSince returns the leases of running jobs cancelled at or after
// since (see driver.Controller).
func (q *Queue) CancelledSince(ctx context.Context, since time.Time) ([]driver.Lease, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("memqueue: listing cancelled jobs: %w", err)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	var out []driver.Lease
	for _, c := range q.cancels {
		if !c.at.Before(since) {
			out = append(out, c.lease)
		}
	}
	return out, nil
}

// snooze puts the job under l back until at without counting its attempt
// (Complete of OutcomeSnoozed).
func (q *Queue) snooze(ctx context.Context, l driver.Lease, at time.Time, counted bool) error {
	return q.release(ctx, "snoozing", l, at, func(e *entry) {
		e.job.Attempts = max(e.job.Attempts-1, 0)
		if counted {
			e.job.Snoozes++
		}
	})
}

// periodicMark is the record of one periodic job.
type periodicMark = driver.PeriodicInfo

// RegisterPeriodic creates or refreshes the record of a periodic job (see
// driver.Scheduler).
func (q *Queue) RegisterPeriodic(ctx context.Context, p driver.PeriodicInfo) (time.Time, error) {
	if err := ctx.Err(); err != nil {
		return time.Time{}, fmt.Errorf("memqueue: registering periodic job %s: %w", p.Name, err)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	m := q.periodics[p.Name]
	if m == nil {
		m = &periodicMark{Name: p.Name, LastTick: p.LastTick}
		q.periodics[p.Name] = m
	}
	m.Schedule, m.NextTick, m.Seen = p.Schedule, p.NextTick, q.now()
	m.Template = slices.Clone(p.Template)
	return m.LastTick, nil
}

// PausePeriodic sets whether the periodic job name's ticks are claimed
// (see driver.Scheduler).
func (q *Queue) PausePeriodic(ctx context.Context, name string, paused bool) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memqueue: pausing periodic job %s: %w", name, err)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	m := q.periodics[name]
	if m == nil {
		return fmt.Errorf("memqueue: pausing periodic job %s: %w", name, queue.ErrNotFound)
	}
	m.Paused = paused
	return nil
}

// ClaimTick records a periodic job's tick and pushes its job, both or
// neither (see driver.Scheduler).
func (q *Queue) ClaimTick(ctx context.Context, p driver.PeriodicInfo, j queue.Job) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, fmt.Errorf("memqueue: claiming a tick of periodic job %s: %w", p.Name, err)
	}
	if err := driver.Validate(j); err != nil {
		return false, err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if err := q.fencedLocked(ctx); err != nil {
		return false, fmt.Errorf("memqueue: claiming a tick of periodic job %s: %w", p.Name, err)
	}
	m := q.periodics[p.Name]
	if m == nil {
		return false, fmt.Errorf("memqueue: claiming a tick of periodic job %s: %w", p.Name, queue.ErrNotFound)
	}
	if m.Paused || !m.LastTick.Before(p.LastTick) {
		return false, nil
	}
	m.LastTick, m.NextTick, m.Schedule, m.LastJobID, m.Seen = p.LastTick, p.NextTick, p.Schedule, j.ID, q.now()
	if err := q.pushLocked(j, q.now()); err != nil {
		m.LastJobID = ""
	}
	return true, nil
}

// Periodics lists the records of periodic jobs, sorted by name.
func (q *Queue) Periodics(ctx context.Context) ([]driver.PeriodicInfo, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("memqueue: listing periodic jobs: %w", err)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	out := make([]driver.PeriodicInfo, 0, len(q.periodics))
	for _, m := range q.periodics {
		p := *m
		p.Template = slices.Clone(m.Template)
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b driver.PeriodicInfo) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}
