package memqueue

import (
	"context"
	"fmt"

	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// ackPush acks the job under l and pushes jobs in one critical section
// (Complete of OutcomeDone with a Push). Jobs that are duplicates are skipped.
func (q *Queue) ackPush(ctx context.Context, l driver.Lease, jobs []queue.Job, res kept) error {
	return q.finishPush(ctx, "acking", l, jobs, func(e *entry) {
		now := q.now()
		q.finishLocked(e, now)
		q.keepResultLocked(l.JobID, res, now, false)
	})
}

// failPush dead-letters the job under l with reason and pushes jobs in one
// critical section (Complete of OutcomeFailed with a Push).
func (q *Queue) failPush(ctx context.Context, l driver.Lease, reason string, limit int, jobs []queue.Job) error {
	return q.finishPush(ctx, "failing", l, jobs, func(e *entry) {
		q.failLocked(e, reason, limit, q.now())
	})
}

func (q *Queue) finishPush(ctx context.Context, doing string, l driver.Lease, jobs []queue.Job, finish func(e *entry)) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memqueue: %s job %s: %w", doing, l.JobID, err)
	}
	if err := driver.ValidateBatch(jobs); err != nil {
		return err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.now()
	e := q.leasedLocked(l, now.UnixNano())
	if e == nil {
		return fmt.Errorf("memqueue: %s job %s: %w", doing, l.JobID, queue.ErrLeaseLost)
	}
	finish(e)
	for _, j := range jobs {
		// pushLocked fails only for a duplicate, which is skipped.
		_ = q.pushLocked(j, now)
	}
	return nil
}
