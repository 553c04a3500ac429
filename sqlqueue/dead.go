package sqlqueue

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/meridianjobs/meridian/queue"
)

// pruneBatch is how many rows one statement of a bulk removal touches, so no
// statement holds many locks or runs long.
const pruneBatch = 1000

// DeadLetters lists up to limit dead letters of queueName ("" for all),
// most recently failed first. A limit below 1 or above 1000 is taken as
// 1000.
func (q *Queue) DeadLetters(ctx context.Context, queueName string, limit int) ([]queue.Job, error) {
	if err := q.use(ctx); err != nil {
		return nil, err
	}
	if limit < 1 || limit > 1000 {
		limit = 1000
	}
	query, args := q.stmt(qDeadLetters), []any{limit}
	if queueName != "" {
		query, args = q.stmt(qDeadLettersOf), []any{queueName, limit}
	}
	rows, err := q.queryRows(ctx, query, args...)
	if err != nil {
		return nil, q.wrap(ctx, err, "listing dead letters")
	}
	jobs := make([]queue.Job, len(rows))
	for i, r := range rows {
		jobs[i] = r.job
	}
	return jobs, nil
}

// queryRows runs a query of jobCols on the database and scans every row.
func (q *Queue) queryRows(ctx context.Context, query string, args ...any) ([]row, error) {
	return q.scanRows(ctx, stmts(q.db), query, args)
}

// RetryDead moves the dead letter id back to ready, available now, with
// its attempts reset. ErrNotFound if id is not a dead letter; an error
// matching ErrDuplicate if its unique key is now held by an active job.
func (q *Queue) RetryDead(ctx context.Context, id string) error {
	if err := q.use(ctx); err != nil {
		return err
	}
	now := micros(time.Now())
	n, err := stmts(q.db).Exec(ctx, q.stmt(qRetryDead), now, now, now, id)
	if q.d.isUniqueViolation(err) {
		return fmt.Errorf("sqlqueue: retrying dead letter %s: its unique key is held by an active job: %w", id, queue.ErrDuplicate)
	}
	if err := q.affectedOne(ctx, n, err, "retrying dead letter "+id); err != nil {
		return err
	}
	q.wake.signal()
	return nil
}

// affectedOne turns a statement that changed no row (n) into ErrNotFound.
func (q *Queue) affectedOne(ctx context.Context, n int64, err error, what string) error {
	if err != nil {
		return q.wrap(ctx, err, "%s", what)
	}
	if n == 0 {
		return fmt.Errorf("sqlqueue: %s: %w", what, queue.ErrNotFound)
	}
	return nil
}

// ForgetDead deletes the dead letter id. ErrNotFound if id is not one.
func (q *Queue) ForgetDead(ctx context.Context, id string) error {
	if err := q.use(ctx); err != nil {
		return err
	}
	var n int64
	err := q.againOnConflict(ctx, func() error {
		return q.d.writeTx(ctx, q, func(ex execer) error {
			st := stmts(ex)
			var err error
			if n, err = st.Exec(ctx, q.stmt(qForgetDead), id); err != nil || n == 0 {
				return err
			}
			// A dead head that held its sequence passes it on.
			_, err = q.seqPassOn(ctx, st, []string{id}, false)
			return err
		})
	})
	if err := q.affectedOne(ctx, n, err, "forgetting dead letter "+id); err != nil {
		return err
	}
	q.wake.signal()
	return nil
}

// FlushDead deletes every dead letter of queueName ("" for all), in batches
// by primary key, and reports how many it deleted.
func (q *Queue) FlushDead(ctx context.Context, queueName string) (int, error) {
	if err := q.use(ctx); err != nil {
		return 0, err
	}
	sel, args := qDeadIDs, []any(nil)
	if queueName != "" {
		sel, args = qDeadIDsOf, []any{queueName}
	}
	n, err := q.deleteBatches(ctx, sel, args, qForgetDeadIn, func(st statements, ids []string) error {
		_, err := q.seqPassOn(ctx, st, ids, false)
		return err
	})
	if err != nil {
		return n, q.wrap(ctx, err, "flushing dead letters")
	}
	return n, nil
}

// Len counts the pending jobs (ready, scheduled or running) of queueName
// ("" for all). The count is exact.
func (q *Queue) Len(ctx context.Context, queueName string) (int, error) {
	if err := q.use(ctx); err != nil {
		return 0, err
	}
	query, args := q.stmt(qLen), []any(nil)
	if queueName != "" {
		query, args = q.stmt(qLenOf), []any{queueName}
	}
	var n int
	if err := queryRow(ctx, stmts(q.db), query, args, &n); err != nil {
		return 0, q.wrap(ctx, err, "counting jobs")
	}
	return n, nil
}

// Purge deletes the waiting (ready and scheduled) jobs of queueName ("" for
// all) in batches and reports how many it removed. Jobs under a lease,
// expired or not, and dead letters are left alone. A batch's pending
// member, and a pending node of a graph, is cancelled instead (Cancel), so
// its batch counts it and can finish, and its graph cancels its
// dependants and can finish.
func (q *Queue) Purge(ctx context.Context, queueName string) (int, error) {
	if err := q.use(ctx); err != nil {
		return 0, err
	}
	sel, args := qWaitingIDs, []any(nil)
	if queueName != "" {
		sel, args = qWaitingIDsOf, []any{queueName}
	}
	// Members and graph nodes first, one by one, each cancelled as Cancel
	// does (its batch counts it; its graph cancels its dependants): the
	// batch_jobs table is small beside the jobs, and its pending rows are
	// the members not yet finished; the nodes are those of graphs that
	// run.
	members, err := q.pendingMembers(ctx, queueName, qPendingMembers, qPendingMembersOf)
	if err != nil {
		return 0, q.wrap(ctx, err, "purging jobs")
	}
	nodes, err := q.pendingMembers(ctx, queueName, qPendingNodes, qPendingNodesOf)
	if err != nil {
		return 0, q.wrap(ctx, err, "purging jobs")
	}
	members = append(members, nodes...)
	n, err := q.cancelEach(ctx, members)
	if err != nil {
		return n, q.wrap(ctx, err, "purging jobs")
	}
	del, err := q.deleteBatches(ctx, sel, args, qDeleteWaitingIn, func(st statements, ids []string) error {
		_, err := q.seqLeave(ctx, st, ids)
		return err
	})
	n += del
	if err != nil {
		return n, q.wrap(ctx, err, "purging jobs")
	}
	return n, nil
}

// pendingMembers returns the IDs of the waiting jobs of queueName ("" for
// all) that are pending members of a batch (all, of: qPendingMembers and
// qPendingMembersOf) or pending nodes of a graph (qPendingNodes and
// qPendingNodesOf).
func (q *Queue) pendingMembers(ctx context.Context, queueName string, all, of query) ([]string, error) {
	query, args := q.stmt(all), []any(nil)
	if queueName != "" {
		query, args = q.stmt(of), []any{queueName}
	}
	return queryStrings(ctx, stmts(q.db), query, args...)
}

// cancelEach cancels the jobs ids with Cancel, skipping those that have
// finished or gone meanwhile, and reports how many it cancelled.
func (q *Queue) cancelEach(ctx context.Context, ids []string) (int, error) {
	n := 0
	for _, id := range ids {
		_, err := q.Cancel(ctx, id)
		switch {
		case err == nil:
			n++
		case errors.Is(err, queue.ErrNotFound), errors.Is(err, queue.ErrFinished):
		default:
			return n, err
		}
	}
	return n, nil
}

// deleteBatches deletes jobs pruneBatch at a time: sel (with args) lists
// the IDs of up to pruneBatch of them, and del deletes the jobs of an ID
// list that still match what sel selected; then, in the same transaction,
// settle settles the sequences of the listed jobs (see seqLeave).
func (q *Queue) deleteBatches(ctx context.Context, sel query, args []any, del query, settle func(st statements, ids []string) error) (int, error) {
	total := 0
	for {
		ids, err := queryStrings(ctx, stmts(q.db), q.stmt(sel), args...)
		if err != nil {
			return total, err
		}
		if len(ids) == 0 {
			return total, nil
		}
		var n int64
		err = q.againOnConflict(ctx, func() error {
			return q.d.writeTx(ctx, q, func(ex execer) error {
				st := stmts(ex)
				var err error
				if n, err = q.execIn(ctx, st, del, ids); err != nil {
					return err
				}
				return settle(st, ids)
			})
		})
		if err != nil {
			return total, err
		}
		q.wake.signal()
		total += int(n)
		if len(ids) < pruneBatch {
			return total, nil
		}
	}
}
