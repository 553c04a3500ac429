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
	stmt, args := q.finishStatement(queue.OutcomeDone, "", now)
	return q.finishPush(ctx, "acking", l, stmt, args, now, jobs)
}

// FailPush dead-letters the job under l with reason and pushes jobs in one
// write transaction (see queue.Chainer).
func (q *Queue) FailPush(ctx context.Context, l queue.Lease, reason string, jobs []queue.Job) error {
	now := micros(time.Now())
	stmt, args := q.finishStatement(queue.OutcomeFailed, reason, now)
	return q.finishPush(ctx, "dead-lettering", l, stmt, args, now, jobs)
}

// finishStatement is the head of the lease-guarded statement (see
// execLeased; its condition is leaseGuard) that ends the job under a lease
// with outcome o at now, and its arguments before the lease's and now:
// OutcomeDone deletes it (or keeps it as done under WithRetention),
// OutcomeFailed dead-letters it with reason, recorded in its attempt
// history as Fail does, and OutcomeCancelled cancels it. Any other outcome
// gives "".
func (q *Queue) finishStatement(o queue.Outcome, reason string, now int64) (string, []any) {
	switch o {
	case queue.OutcomeDone:
		if set := q.finishSet(); set != "" {
			return "UPDATE {jobs} SET " + set, []any{now, now}
		}
		return "DELETE FROM {jobs}", nil
	case queue.OutcomeFailed:
		hist, hargs := q.historySet(now, reason)
		return "UPDATE {jobs} SET " + hist + ", state = 'dead', lease_token = NULL{unlease}, last_error = ?, finished_at = ?, updated_at = ?",
			append(hargs, reason, now, now)
	case queue.OutcomeCancelled:
		return "UPDATE {jobs} SET state = 'cancelled', lease_token = NULL{unlease}, last_error = ?, finished_at = ?, updated_at = ?",
			[]any{queue.ErrCancelled.Error(), now, now}
	}
	return "", nil
}

// finishPush runs the lease-guarded stmt (a finishStatement: args, then
// the lease and now) and, when it changed the job, pushes jobs in the same
// transaction.
func (q *Queue) finishPush(ctx context.Context, what string, l queue.Lease, stmt string, args []any, now int64, jobs []queue.Job) error {
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
