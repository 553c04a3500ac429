package sqlqueue

import (
	"context"
	"errors"
	"fmt"
	"time"

	queue "github.com/meridianjobs/meridian/queue/driver"
)

// bulkChunk is how many jobs one statement of a bulk action changes: the
// jobs of one ListJobs page, selected on the index that orders the list.
const bulkChunk = maxPage

// ActOn applies a to at most limit jobs matching f (see queue.BulkActor):
// it reads the matching jobs a page of 500 at a time through ListJobs,
// with its filters, bounds and index use, and changes each page with one
// statement by primary key that also requires the state the action
// acts on, so jobs that moved on meanwhile are left alone. A batch member
// is cancelled by Cancel, one transaction each, so that its batch counts
// it.
func (q *Queue) ActOn(ctx context.Context, f queue.JobFilter, a queue.BulkAction, limit int, rec queue.Action) (int, error) {
	if err := q.use(ctx); err != nil {
		return 0, err
	}
	if err := queue.CheckBulk(a, f.State, limit); err != nil {
		return 0, err
	}
	f.After, f.Scan = "", 0
	total := 0
	defer func() {
		if a == queue.BulkRetry && total > 0 {
			q.wake.signal()
		}
	}()
	for total < limit {
		f.Limit = min(bulkChunk, limit-total)
		page, err := q.ListJobs(ctx, f)
		if err != nil {
			return total, err
		}
		// A batch member's cancel is Cancel's, which counts it in its
		// batch; every other job's is one statement per page.
		ids, members := make([]string, 0, len(page.Jobs)), []string(nil)
		for _, j := range page.Jobs {
			if a == queue.BulkCancel && j.Meta[queue.MetaBatch] != "" {
				members = append(members, j.ID)
			} else {
				ids = append(ids, j.ID)
			}
		}
		n, err := q.cancelEach(ctx, members)
		total += n
		if err == nil && len(ids) > 0 {
			n, err = q.actOnIDs(ctx, a, ids, rec)
			total += n
		}
		if err != nil {
			return total, q.wrap(ctx, err, "bulk %s of %s jobs", a, f.State)
		}
		if page.Next == "" {
			break
		}
		f.After = page.Next
	}
	return total, nil
}

// actOnIDs applies a to the jobs ids that are still in the state it acts
// on, in one statement (a retry with rec.What appends rec to each job's
// history in it), and reports how many it changed.
func (q *Queue) actOnIDs(ctx context.Context, a queue.BulkAction, ids []string, rec queue.Action) (int, error) {
	now := micros(time.Now())
	var stmt query
	var args []any
	switch {
	case a == queue.BulkRetry && rec.What != "":
		rec = rec.Dated(fromMicros(now))
		stmt, args = qRetryDeadInNoted, []any{now, now, now, micros(rec.At), rec.By, rec.What, ids}
	case a == queue.BulkRetry:
		stmt, args = qRetryDeadIn, []any{now, now, now, ids}
	case a == queue.BulkForget:
		stmt, args = qForgetDeadIn, []any{ids}
	case a == queue.BulkCancel:
		stmt, args = qCancelJobsIn, []any{now, now, queue.ErrCancelled.Error(), ids}
	default:
		return 0, fmt.Errorf("unknown bulk action %q: %w", a, queue.ErrBulkState)
	}
	var n int64
	var err error
	if a == queue.BulkRetry {
		n, err = q.execIn(ctx, stmts(q.db), stmt, args...)
	} else {
		// A forgotten or cancelled head passes its sequence on, and a
		// cancelled waiting member leaves it, in the same transaction.
		err = q.againOnConflict(ctx, func() error {
			return q.d.writeTx(ctx, q, func(ex execer) error {
				st := stmts(ex)
				var err error
				if n, err = q.execIn(ctx, st, stmt, args...); err != nil {
					return err
				}
				_, err = q.seqLeave(ctx, st, ids)
				return err
			})
		})
		q.wake.signal()
	}
	if a == queue.BulkRetry && q.d.isUniqueViolation(err) {
		// Some dead letter's unique key is held by an active job, which
		// fails the whole statement: retry this chunk one by one and
		// skip those.
		return q.retryEach(ctx, ids, rec)
	}
	return int(n), err
}

// retryEach retries the dead letters ids one by one (through Amend, which
// records rec, when rec.What is set), skipping those whose unique key is
// taken and those no longer dead.
func (q *Queue) retryEach(ctx context.Context, ids []string, rec queue.Action) (int, error) {
	n := 0
	for _, id := range ids {
		var err error
		if rec.What != "" {
			_, err = q.Amend(ctx, id, queue.Amendment{Op: queue.AmendRetry, Action: rec, From: queue.StateDead})
		} else {
			err = q.RetryDead(ctx, id)
		}
		switch {
		case err == nil:
			n++
		case errors.Is(err, queue.ErrDuplicate), errors.Is(err, queue.ErrNotFound), errors.Is(err, queue.ErrJobState):
		default:
			return n, err
		}
	}
	return n, nil
}

// CountJobs counts the jobs matching f, exact up to limit (see
// queue.BulkActor): a COUNT over the same bounded index scans ListJobs
// reads. With a payload search it counts the matches among the first
// 10,000 jobs and sets More when there were that many. The ready jobs of
// one queue or all, with no name, tag or search filter, are counted as
// Counts counts them (the counts table, less the scheduled jobs and those
// the workers hold), so the count costs a few rows, matches the
// dashboard's tab, and needs no lease test per job (no index holds the
// lease expiry on PostgreSQL and MySQL).
func (q *Queue) CountJobs(ctx context.Context, f queue.JobFilter, limit int) (queue.Count, error) {
	if err := q.use(ctx); err != nil {
		return queue.Count{}, err
	}
	if limit < 1 {
		return queue.Count{}, fmt.Errorf("sqlqueue: counting jobs with limit %d: %w", limit, queue.ErrBulkState)
	}
	if f.State == queue.StateReady && f.Name == "" && f.Tag == "" && f.Search == "" {
		return q.countReady(ctx, f.Queue, limit)
	}
	search, err := queue.ParseSearch(f.Search)
	if err != nil {
		return queue.Count{}, fmt.Errorf("sqlqueue: counting jobs: %w", err)
	}
	now := micros(time.Now())
	f.After = ""
	cond, args, err := q.filterCond(f, now)
	if err != nil {
		return queue.Count{}, err
	}
	inner := limit + 1
	var timeout time.Duration
	if f.Search != "" {
		inner, timeout = searchRows, searchTimeout
	}
	var examined, matched int64
	listing := f.State != queue.StateScheduled && f.State != queue.StateRunning
	err = q.inspectRead(ctx, timeout, listing, func(st statements) error {
		// seq alone, or with the payload to search: MariaDB materializes
		// a derived table's every column.
		cols := orderOf(f.State).keyCols()
		if f.Search != "" {
			cols += ", payload"
		}
		query, args, err := q.listQuery(ctx, st, f, now, cond, args, nil, nil, inner, cols)
		if err != nil || query == "" {
			return err
		}
		if len(search.Fields) > 0 {
			// Field filters are tested in Go (see search): read the
			// payloads of the jobs that hold the substrings.
			examined, matched, err = q.countFields(ctx, st, query, args, search)
			return err
		}
		query, args = q.countQuery(query, args, search.Text)
		if f.Search == "" {
			return queryRow(ctx, st, query, args, &examined)
		}
		return queryRow(ctx, st, query, args, &examined, &matched)
	})
	if err != nil {
		return queue.Count{}, q.wrap(ctx, err, "counting %s jobs", f.State)
	}
	if f.Search == "" {
		matched = examined
	}
	c := queue.Count{N: min(matched, int64(limit)), More: matched > int64(limit)}
	if f.Search != "" && examined >= int64(inner) {
		c.More = true
	}
	return c, nil
}

// countFields counts the rows of list (a list statement of key columns
// and payload, with its arguments) and those whose payload matches s,
// field filters included, reading the payloads.
func (q *Queue) countFields(ctx context.Context, st statements, list string, args []any, s queue.Search) (examined, matched int64, err error) {
	rs, err := st.Query(ctx, q.rebind("SELECT payload FROM ("+list+") s"), args...)
	if err != nil {
		return 0, 0, err
	}
	defer rs.Close()
	for rs.Next() {
		var p []byte
		if err := rs.Scan(&p); err != nil {
			return 0, 0, err
		}
		examined++
		if s.Match(p) {
			matched++
		}
	}
	return examined, matched, rs.Err()
}

// countReady is CountJobs of the ready jobs of queueName (every queue
// when it is ""), from Counts.
func (q *Queue) countReady(ctx context.Context, queueName string, limit int) (queue.Count, error) {
	cs, err := q.Counts(ctx)
	if err != nil {
		return queue.Count{}, err
	}
	var c queue.Count
	for _, qc := range cs {
		if queueName == "" || qc.Queue == queueName {
			c.N += qc.Ready.N
			c.Estimate = c.Estimate || qc.Ready.Estimate
		}
	}
	c.N, c.More = min(c.N, int64(limit)), c.N > int64(limit)
	return c, nil
}
