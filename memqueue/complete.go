package memqueue

import (
	"context"
	"fmt"

	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// Complete counts the attempts of the jobs under starts and records each
// outcome of outs (see queue.Queue.Complete). It fails as a whole only
// for ctx; each outcome is recorded in a critical section of its own.
func (q *Queue) Complete(ctx context.Context, starts []driver.Lease, outs []driver.Completion) ([]driver.Lease, []error, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, fmt.Errorf("memqueue: completing %d jobs: %w", len(starts)+len(outs), err)
	}
	var lost []driver.Lease
	if len(starts) > 0 {
		var err error
		if lost, err = q.start(ctx, starts); err != nil {
			return nil, nil, err
		}
	}
	errs := make([]error, len(outs))
	for i, o := range outs {
		errs[i] = q.complete(ctx, o)
	}
	return lost, errs, nil
}

// complete records the one outcome o.
func (q *Queue) complete(ctx context.Context, o driver.Completion) error {
	l := o.Lease
	switch o.Outcome {
	case driver.OutcomeDone:
		switch {
		case o.Graph != "":
			return q.finishNode(ctx, l, o.Graph, o.Outcome, "", 0, resultOf(o))
		case o.Batch != "":
			return q.finishMember(ctx, l, o.Batch, o.Outcome, "", 0, resultOf(o), o.Push)
		case len(o.Push) > 0:
			return q.ackPush(ctx, l, o.Push, resultOf(o))
		}
		return q.ack(ctx, l, resultOf(o))
	case driver.OutcomeFailed:
		switch {
		case o.Graph != "":
			return q.finishNode(ctx, l, o.Graph, o.Outcome, o.Reason, o.MaxAttempts, kept{})
		case o.Batch != "":
			return q.finishMember(ctx, l, o.Batch, o.Outcome, o.Reason, o.MaxAttempts, kept{}, o.Push)
		case len(o.Push) > 0:
			return q.failPush(ctx, l, o.Reason, o.MaxAttempts, o.Push)
		}
		return q.fail(ctx, l, o.Reason, o.MaxAttempts)
	case driver.OutcomeCancelled:
		switch {
		case o.Graph != "":
			return q.finishNode(ctx, l, o.Graph, o.Outcome, "", 0, kept{})
		case o.Batch != "":
			return q.finishMember(ctx, l, o.Batch, o.Outcome, "", 0, kept{}, nil)
		}
		return q.cancelLeased(ctx, l)
	case driver.OutcomeRetried:
		return q.nack(ctx, l, o.At, o.Reason)
	case driver.OutcomeSnoozed:
		return q.snooze(ctx, l, o.At, o.Counted)
	}
	return fmt.Errorf("memqueue: completing job %s: unknown outcome %d", l.JobID, o.Outcome)
}

// cancelLeased cancels the job under l, as its handler asked.
func (q *Queue) cancelLeased(ctx context.Context, l driver.Lease) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memqueue: cancelling job %s: %w", l.JobID, err)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.now()
	e := q.leasedLocked(l, now.UnixNano())
	if e == nil {
		return fmt.Errorf("memqueue: cancelling job %s: %w", l.JobID, queue.ErrLeaseLost)
	}
	q.cancelLocked(e, now)
	return nil
}
