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
	stmt, args := "DELETE FROM {jobs} WHERE "+leaseGuard, []any(nil)
	if set := q.finishSet(); set != "" {
		stmt, args = "UPDATE {jobs} SET "+set+" WHERE "+leaseGuard, []any{now, now}
	}
	return q.finishPush(ctx, "acking", l, stmt, args, now, jobs)
}

// FailPush dead-letters the job under l with reason and pushes jobs in one
// write transaction (see queue.Chainer).
func (q *Queue) FailPush(ctx context.Context, l queue.Lease, reason string, jobs []queue.Job) error {
	now := micros(time.Now())
	hist, hargs := q.historySet(now, reason)
	return q.finishPush(ctx, "dead-lettering", l,
		"UPDATE {jobs} SET "+hist+", state = 'dead', lease_token = NULL{unlease}, last_error = ?, finished_at = ?, updated_at = ? WHERE "+leaseGuard,
		append(hargs, reason, now, now), now, jobs)
}

// finishPush runs the lease-guarded stmt (args, then the lease and now)
// and, when it changed the job, pushes jobs in the same transaction.
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
		n, err := st.Exec(ctx, q.sql(stmt), append(args, l.JobID, l.Token, now)...)
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
