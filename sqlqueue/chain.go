package sqlqueue

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/meridianjobs/meridian/queue"
)

// errLeaseGone ends a finish-and-push transaction whose lease was not
// current, rolling it back.
var errLeaseGone = errors.New("lease not current")

// AckPush acks the job under l (deleting it, or keeping it as done under
// WithRetention) and pushes jobs in one write transaction (see
// queue.Chainer): both are stored or neither. Jobs that are duplicates are
// skipped. A lease that is not current returns queue.ErrLeaseLost and
// pushes nothing.
func (q *Queue) AckPush(ctx context.Context, l queue.Lease, jobs []queue.Job) error {
	now := micros(time.Now())
	stmt, args, _ := q.finishQuery(queue.OutcomeDone, "", now)
	return q.finishPush(ctx, "acking", l, stmt, args, now, jobs)
}

// FailPush dead-letters the job under l with reason and pushes jobs in one
// write transaction (see queue.Chainer).
func (q *Queue) FailPush(ctx context.Context, l queue.Lease, reason string, jobs []queue.Job) error {
	now := micros(time.Now())
	stmt, args, _ := q.finishQuery(queue.OutcomeFailed, reason, now)
	return q.finishPush(ctx, "dead-lettering", l, stmt, args, now, jobs)
}

// finishQuery is the lease-guarded statement (see execLeased) that ends
// the job under a lease with outcome o at now, and its arguments before
// the lease's: OutcomeDone deletes it (or keeps it as done under
// WithRetention), OutcomeFailed dead-letters it with reason, recorded in
// its attempt history as Fail does, and OutcomeCancelled cancels it. Any
// other outcome gives false.
func (q *Queue) finishQuery(o queue.Outcome, reason string, now int64) (query, []any, bool) {
	switch o {
	case queue.OutcomeDone:
		stmt, args := q.ackQuery(now)
		return stmt, args, true
	case queue.OutcomeFailed:
		return qDeadLeased, []any{now, historyError(reason), reason, now, now}, true
	case queue.OutcomeCancelled:
		return qCancelLeased, []any{queue.ErrCancelled.Error(), now, now}, true
	}
	return 0, nil, false
}

// finishPush runs the lease-guarded stmt (a finishQuery: args, then the
// lease) and, when it changed the job, pushes jobs in the same
// transaction.
func (q *Queue) finishPush(ctx context.Context, what string, l queue.Lease, stmt query, args []any, now int64, jobs []queue.Job) error {
	if err := queue.ValidateBatch(jobs); err != nil {
		return err
	}
	if err := q.use(ctx); err != nil {
		return err
	}
	var stored []bool
	err := q.d.writeTx(ctx, q, func(ex execer) error {
		st := stmts(ex)
		n, err := q.execLeased(ctx, st, stmt, l, now, args...)
		if err != nil {
			return err
		}
		if n == 0 {
			return errLeaseGone
		}
		if len(jobs) == 0 {
			return nil
		}
		stored, err = q.pushMany(ctx, st, true, jobs)
		return err
	})
	if errors.Is(err, errLeaseGone) {
		return fmt.Errorf("sqlqueue: %s job %s: %w", what, l.JobID, queue.ErrLeaseLost)
	}
	if err != nil {
		return q.wrap(ctx, err, "%s job %s and pushing %d jobs", what, l.JobID, len(jobs))
	}
	if len(jobs) > 0 {
		q.wakeFor(jobs, stored)
	}
	q.flushMetricsIfDue(ctx)
	return nil
}
