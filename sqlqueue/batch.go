package sqlqueue

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	queue "github.com/meridianjobs/meridian/queue/driver"
)

// Batches (queue.Batcher) live in two tables: <table>_batches, one row per
// batch with its counters and the moments its callbacks came due, and
// <table>_batch_jobs, one row per member with where it stands.
//
// A transaction that records a member's outcome (or cancels a batch) takes
// its locks in one order: member rows, then job rows, then the batch row,
// whose counters it updates last and holds only until its commit. Having
// changed the row it reads it, and a callback the counters make due is
// pushed by the transaction whose conditional change of the callback's
// *_at column (from 0) changes the row: a second transaction, serialized
// behind the first on the row, finds the column set and pushes nothing.
// Cancelling a batch's pending members locks many member rows, so it runs
// in a transaction that holds nothing else first, and only in the one
// process whose transaction marked the batch cancelled (a failure without
// AllowFailures, or CancelBatch), right after that commit: done inside the
// failure's transaction, two failures at once would each hold their own
// member row while waiting for the other's, and two cancels would scan
// the same rows in different orders. Should that second transaction not
// happen (a crash), the members run and are counted as they finish. AddToBatch
// locks the batch row first and then inserts rows no one else holds. The
// statements are the same in every dialect.

var _ queue.Workflows = (*Queue)(nil)

// batchCols are the columns scanBatch reads.
const batchCols = "id, name, allow_failures, total, done, failed, cancelled, created_at, cancelled_at, then_at, catch_at, finished_at"

// memberChunk is how many member rows one qInsertMembers carries.
const memberChunk = 400

// errBatchGone ends a transaction on a batch that does not exist.
var errBatchGone = errors.New("batch not found")

// batchTx runs fn in one write transaction, with the statements and the
// time, again when the server rolled it back to break a deadlock.
func (q *Queue) batchTx(ctx context.Context, fn func(st statements, now int64) error) error {
	return q.againOnConflict(ctx, func() error {
		return q.d.writeTx(ctx, q, func(ex execer) error { return fn(stmts(ex), micros(time.Now())) })
	})
}

// PushBatch stores rec and pushes its members in one write transaction
// (see queue.BatchDispatcher).
func (q *Queue) PushBatch(ctx context.Context, rec queue.BatchRecord, jobs []queue.Job) (int, error) {
	if err := queue.ValidateBatch(jobs); err != nil {
		return 0, err
	}
	if err := q.use(ctx); err != nil {
		return 0, err
	}
	var stored []bool
	err := q.batchTx(ctx, func(st statements, _ int64) error {
		var err error
		stored, err = q.pushBatch(ctx, st, rec, jobs)
		return err
	})
	if err != nil {
		return 0, q.wrap(ctx, err, "pushing batch %s of %d jobs", rec.ID, len(jobs))
	}
	q.wakeFor(jobs, stored)
	q.announce(jobs, stored)
	return countTrue(stored), nil
}

// PushBatch stores rec and pushes its members in the caller's transaction
// (see queue.BatchDispatcher): the batch exists if and only if the
// transaction commits.
func (p *TxPusher) PushBatch(ctx context.Context, rec queue.BatchRecord, jobs []queue.Job) (int, error) {
	if err := queue.ValidateBatch(jobs); err != nil {
		return 0, err
	}
	if err := p.q.useTx(ctx, p.st); err != nil {
		return 0, err
	}
	stored, err := p.q.pushBatch(ctx, p.st, rec, jobs)
	if err != nil {
		return 0, p.q.wrap(ctx, err, "pushing batch %s of %d jobs in a transaction", rec.ID, len(jobs))
	}
	return countTrue(stored), nil
}

func (q *Queue) pushBatch(ctx context.Context, st statements, rec queue.BatchRecord, jobs []queue.Job) ([]bool, error) {
	now := micros(time.Now())
	allow := 0
	if rec.AllowFailures {
		allow = 1
	}
	_, err := st.Exec(ctx, q.stmt(qBatchInsert),
		rec.ID, rec.Name, allow, rec.Callbacks, now, now)
	if err != nil {
		if q.d.isUniqueViolation(err) {
			return nil, &queue.DuplicateError{ExistingID: rec.ID}
		}
		return nil, err
	}
	return q.addMembers(ctx, st, rec.ID, jobs, now)
}

// addMembers pushes jobs in st's transaction and records the stored ones
// as members of batch id.
func (q *Queue) addMembers(ctx context.Context, st statements, id string, jobs []queue.Job, now int64) ([]bool, error) {
	stored, err := q.pushMany(ctx, st, true, jobs)
	if err != nil {
		return nil, err
	}
	var ids []any
	for i, j := range jobs {
		if stored[i] {
			ids = append(ids, id, j.ID)
		}
	}
	var added int64
	for len(ids) > 0 {
		n := min(len(ids)/2, memberChunk)
		k, err := st.Exec(ctx, q.stmtN(qInsertMembers, n), ids[:2*n]...)
		if err != nil {
			return nil, err
		}
		added += k
		ids = ids[2*n:]
	}
	if _, err := st.Exec(ctx, q.stmt(qBatchAddTotal), added, now, id); err != nil {
		return nil, err
	}
	return stored, nil
}

// AddToBatch pushes jobs as new members of batch id in one write
// transaction (see queue.Batcher).
func (q *Queue) AddToBatch(ctx context.Context, id string, jobs []queue.Job) (int, error) {
	if err := queue.ValidateBatch(jobs); err != nil {
		return 0, err
	}
	if err := q.use(ctx); err != nil {
		return 0, err
	}
	var stored []bool
	err := q.batchTx(ctx, func(st statements, now int64) error {
		b, err := q.lockBatch(ctx, st, id, now)
		if err != nil {
			return err
		}
		if b.cancelledAt != 0 || b.finishedAt != 0 {
			return queue.ErrBatchClosed
		}
		stored, err = q.addMembers(ctx, st, id, jobs, now)
		return err
	})
	switch {
	case errors.Is(err, errBatchGone):
		return 0, fmt.Errorf("sqlqueue: adding to batch %s: %w", id, queue.ErrNotFound)
	case errors.Is(err, queue.ErrBatchClosed):
		return 0, fmt.Errorf("sqlqueue: adding to batch %s: %w", id, err)
	case err != nil:
		return 0, q.wrap(ctx, err, "adding %d jobs to batch %s", len(jobs), id)
	}
	q.wakeFor(jobs, stored)
	q.announce(jobs, stored)
	return countTrue(stored), nil
}

// batchRow is what a transaction reads of a batch row it has locked.
type batchRow struct {
	cancelledAt, finishedAt int64
}

// lockBatch updates batch id's row, taking its lock, and reads it;
// errBatchGone if there is none. Only AddToBatch takes the batch row
// first (see the lock order above).
func (q *Queue) lockBatch(ctx context.Context, st statements, id string, now int64) (batchRow, error) {
	n, err := st.Exec(ctx, q.stmt(qBatchTouch), now, id)
	if err != nil {
		return batchRow{}, err
	}
	if n == 0 {
		return batchRow{}, errBatchGone
	}
	var b batchRow
	err = queryRow(ctx, st, q.stmt(qBatchEnds), []any{id}, &b.cancelledAt, &b.finishedAt)
	return b, err
}

// completeMember records the outcome c of a member of batch c.Batch, in
// one write transaction with the member's ack, dead-lettering or cancel,
// and with its result if it has one (Complete's part for batch members);
// c.MaxAttempts is a dead letter's attempt limit (see finishQuery).
func (q *Queue) completeMember(ctx context.Context, c queue.Completion) error {
	l, batchID, o := c.Lease, c.Batch, c.Outcome
	if err := queue.ValidateBatch(c.Push); err != nil {
		return err
	}
	var pushed []queue.Job
	var cancel bool
	err := q.batchTx(ctx, func(st statements, _ int64) error {
		var err error
		pushed, cancel, err = q.finishMember(ctx, st, c)
		return err
	})
	if errors.Is(err, errLeaseGone) {
		return fmt.Errorf("sqlqueue: finishing batch member %s: %w", l.JobID, queue.ErrLeaseLost)
	}
	if err != nil {
		return q.wrap(ctx, err, "finishing batch member %s as %s", l.JobID, o)
	}
	if cancel {
		// The failure marked the batch cancelled; its pending members
		// are cancelled now, in a transaction of their own (see the lock
		// order above). Should it fail, they run and are counted as they
		// finish: the batch still finishes.
		more, err := q.cancelRest(ctx, batchID)
		if err != nil {
			q.log.Warn("sqlqueue: cancelling the members of a batch cancelled by a failure; they will run", "batch", batchID, "err", err)
		}
		pushed = append(pushed, more...)
	}
	if len(pushed) > 0 {
		q.wakeFor(pushed, allStored(pushed))
	}
	return nil
}

// cancelRest cancels batch id's pending members in one write transaction
// and pushes the callbacks that makes due; it returns them. Only the
// transaction that marked the batch cancelled calls it (markCancelled).
func (q *Queue) cancelRest(ctx context.Context, id string) ([]queue.Job, error) {
	var pushed []queue.Job
	err := q.batchTx(ctx, func(st statements, now int64) error {
		k, err := q.cancelMemberJobs(ctx, st, id, now)
		if err != nil {
			return err
		}
		if err := q.countBatch(ctx, st, id, [3]int64{0, 0, k}, now); err != nil {
			return err
		}
		pushed, err = q.fireDue(ctx, st, id, now, "", "")
		return err
	})
	return pushed, err
}

// finishMember is completeMember's transaction; it returns the callback jobs
// it pushed and whether it marked the batch cancelled (a failure without
// AllowFailures), whose pending members are then the caller's to cancel.
// It takes its locks in the order every batch transaction does (member
// rows, job rows, the batch row), so the batch row is held only from the
// counters' update to the commit.
func (q *Queue) finishMember(ctx context.Context, st statements, c queue.Completion) ([]queue.Job, bool, error) {
	l, batchID, o, reason := c.Lease, c.Batch, c.Outcome, c.Reason
	nowT := time.Now()
	now := micros(nowT)
	stmt, args, ok := q.finishQuery(o, reason, c.MaxAttempts, now)
	if !ok {
		return nil, false, fmt.Errorf("outcome %s does not finish a job", o)
	}
	// The member's row: where it goes, if it moves at all.
	var from, to queue.BatchMemberState
	for _, f := range []queue.BatchMemberState{queue.MemberPending, queue.MemberFailed} {
		t, ok := queue.MemberTransition(f, o)
		if !ok {
			continue
		}
		n, err := st.Exec(ctx, q.stmt(qMemberSetState), string(t), batchID, l.JobID, string(f))
		if err != nil {
			return nil, false, err
		}
		if n > 0 {
			from, to = f, t
			break
		}
	}
	// The job, under its lease: nothing happened if the lease is gone.
	n, err := q.execLeased(ctx, st, stmt, l, now, args...)
	if err != nil {
		return nil, false, err
	}
	if n == 0 {
		return nil, false, errLeaseGone
	}
	if o == queue.OutcomeDone {
		// A member that was pending belongs to a batch not yet finished:
		// its result is kept until the batch finishes (fireDue).
		if err := q.keepResult(ctx, st, c, nowT, from == queue.MemberPending); err != nil {
			return nil, false, err
		}
	}
	// The jobs pushed with the outcome: a done pending member's (its
	// chain's next step) join its batch, unless the batch was cancelled,
	// before the count, so the batch is not finished between a chain's
	// steps; a failure's (its chain's catch job) are plain jobs.
	var extra []queue.Job
	switch {
	case len(c.Push) == 0:
	case o == queue.OutcomeDone && from == queue.MemberPending:
		b, err := q.lockBatch(ctx, st, batchID, now)
		if err != nil && !errors.Is(err, errBatchGone) {
			return nil, false, err
		}
		if err == nil && b.cancelledAt == 0 && b.finishedAt == 0 {
			stored, err := q.addMembers(ctx, st, batchID, c.Push, now)
			if err != nil {
				return nil, false, err
			}
			for i, j := range c.Push {
				if stored[i] {
					extra = append(extra, j)
				}
			}
		}
	case o == queue.OutcomeFailed:
		stored, err := q.pushMany(ctx, st, true, c.Push)
		if err != nil {
			return nil, false, err
		}
		for i, j := range c.Push {
			if stored[i] {
				extra = append(extra, j)
			}
		}
	}
	if to == "" {
		return extra, false, nil // not a member (or of a batch pruned), or counted already
	}
	// A failure without AllowFailures cancels the members not yet
	// finished: it marks the batch here, and the caller cancels them.
	cancelling := false
	if to == queue.MemberFailed {
		var allow int
		var cancelledAt, finishedAt int64
		err := queryRow(ctx, st, q.stmt(qBatchRules), []any{batchID}, &allow, &cancelledAt, &finishedAt)
		if errors.Is(err, sql.ErrNoRows) {
			return nil, false, nil
		}
		if err != nil {
			return nil, false, err
		}
		cancelling = allow == 0 && cancelledAt == 0 && finishedAt == 0
	}
	var d [3]int64 // done, failed, cancelled
	for s, k := range map[queue.BatchMemberState]int64{from: -1, to: 1} {
		switch s {
		case queue.MemberDone:
			d[0] += k
		case queue.MemberFailed:
			d[1] += k
		case queue.MemberCancelled:
			d[2] += k
		}
	}
	if err := q.countBatch(ctx, st, batchID, d, now); err != nil {
		return nil, false, err
	}
	if cancelling {
		var err error
		if cancelling, err = q.markCancelled(ctx, st, batchID, now); err != nil {
			return nil, false, err
		}
	}
	failed := ""
	if to == queue.MemberFailed {
		failed = l.JobID
	}
	pushed, err := q.fireDue(ctx, st, batchID, now, failed, reason)
	return append(extra, pushed...), cancelling, err
}

// countBatch adds d (done, failed, cancelled) to batch id's counters: the
// transaction's first change of the batch row, which it then holds.
func (q *Queue) countBatch(ctx context.Context, st statements, id string, d [3]int64, now int64) error {
	_, err := st.Exec(ctx, q.stmt(qBatchAddCounters), d[0], d[1], d[2], now, id)
	return err
}

// markCancelled marks batch id cancelled unless it is or has finished, and
// reports whether this call did: of the transactions that would cancel a
// batch (failures, CancelBatch), the one that marks it cancels its
// members, so no two scan its member rows at once.
func (q *Queue) markCancelled(ctx context.Context, st statements, id string, now int64) (bool, error) {
	n, err := st.Exec(ctx, q.stmt(qBatchCancel), now, now, id)
	return n > 0, err
}

// cancelMemberJobs marks batch id's pending members cancelled and cancels
// their jobs (a running one keeps its lease token, so its Worker learns of
// the cancel as from Cancel), and reports how many members it marked. The
// batch's counters are the caller's to update.
func (q *Queue) cancelMemberJobs(ctx context.Context, st statements, id string, now int64) (int64, error) {
	k, err := st.Exec(ctx, q.stmt(qMembersCancel), id)
	if err != nil || k == 0 {
		return 0, err
	}
	// Every cancelled member's job: those cancelled before (by their
	// handlers) are no longer pending and stay as they are.
	ids, err := queryStrings(ctx, st, q.stmt(qMembersCancelled), id)
	if err != nil {
		return 0, err
	}
	for len(ids) > 0 {
		chunk := ids[:min(len(ids), memberChunk)]
		ids = ids[len(chunk):]
		if _, err := q.execIn(ctx, st, qCancelJobsIn, now, now, queue.ErrCancelled.Error(), chunk); err != nil {
			return 0, err
		}
	}
	return k, nil
}

// batchEvents are the statements that mark each callback as come: each
// changes the batch row only if the callback has not come yet and the
// counters make it due (queue.BatchDue, in SQL), so of two transactions
// only the first to change the row pushes the callback.
var batchEvents = map[queue.BatchEvent]query{
	queue.BatchCatch:   qBatchCatch,
	queue.BatchThen:    qBatchThen,
	queue.BatchFinally: qBatchFinally,
}

// fireDue reads batch id (whose row the transaction holds, having just
// changed it) and pushes, in st's transaction, each callback its counters
// make due whose marking statement changes the row, and returns those
// stored. failed and reason name the member whose failure is being
// recorded, for the catch job.
func (q *Queue) fireDue(ctx context.Context, st statements, id string, now int64, failed, reason string) ([]queue.Job, error) {
	info, err := q.readBatch(ctx, st, id)
	if errors.Is(err, errBatchGone) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var rec *queue.BatchRecord
	var out []queue.Job
	for _, ev := range queue.BatchDue(info) {
		n, err := st.Exec(ctx, q.stmt(batchEvents[ev]), now, id)
		if err != nil {
			return nil, err
		}
		if n == 0 {
			continue
		}
		if ev == queue.BatchFinally {
			// The batch finished: its members' results are kept from now
			// for their retention.
			if err := q.releaseResults(ctx, st, qResultsReleaseBatch, id, now); err != nil {
				return nil, err
			}
		}
		if rec == nil {
			rec = &queue.BatchRecord{ID: id}
			if err := queryRow(ctx, st, q.stmt(qBatchCallbacks), []any{id}, &rec.Callbacks); err != nil {
				return nil, err
			}
		}
		j, err := rec.Callback(ev, failed, reason)
		if err != nil {
			return nil, err
		}
		if j != nil {
			out = append(out, *j)
		}
	}
	if len(out) == 0 {
		return nil, nil
	}
	stored, err := q.pushMany(ctx, st, true, out)
	if err != nil {
		return nil, err
	}
	pushed := out[:0]
	for i, j := range out {
		if stored[i] {
			pushed = append(pushed, j)
		}
	}
	return pushed, nil
}

// CancelBatch cancels batch id in one write transaction (see
// queue.Batcher).
func (q *Queue) CancelBatch(ctx context.Context, id string) (queue.BatchInfo, error) {
	if err := q.use(ctx); err != nil {
		return queue.BatchInfo{}, err
	}
	// Mark first, in a short transaction of its own: the member rows are
	// then locked by cancelRest alone, holding nothing else.
	var won bool
	err := q.batchTx(ctx, func(st statements, now int64) error {
		var err error
		won, err = q.markCancelled(ctx, st, id, now)
		return err
	})
	var pushed []queue.Job
	if err == nil && won {
		pushed, err = q.cancelRest(ctx, id)
	}
	var info queue.BatchInfo
	if err == nil {
		info, err = q.readBatch(ctx, stmts(q.db), id)
	}
	if errors.Is(err, errBatchGone) {
		return queue.BatchInfo{}, fmt.Errorf("sqlqueue: cancelling batch %s: %w", id, queue.ErrNotFound)
	}
	if err != nil {
		return queue.BatchInfo{}, q.wrap(ctx, err, "cancelling batch %s", id)
	}
	if len(pushed) > 0 {
		q.wakeFor(pushed, allStored(pushed))
	}
	return info, nil
}

// scanBatch reads batchCols.
func scanBatch(sc scanner) (queue.BatchInfo, error) {
	var b queue.BatchInfo
	var allow int
	var total, done, failed, cancelled, created, cancelledAt, thenAt, catchAt, finishedAt int64
	if err := sc.Scan(&b.ID, &b.Name, &allow, &total, &done, &failed, &cancelled, &created, &cancelledAt, &thenAt, &catchAt, &finishedAt); err != nil {
		return b, err
	}
	b.AllowFailures = allow != 0
	b.Total, b.Done, b.Failed, b.Cancelled = int(total), int(done), int(failed), int(cancelled)
	b.Pending = b.Total - b.Done - b.Failed - b.Cancelled
	b.CreatedAt = fromMicros(created)
	for _, t := range []struct {
		to *time.Time
		us int64
	}{{&b.CancelledAt, cancelledAt}, {&b.ThenAt, thenAt}, {&b.CatchAt, catchAt}, {&b.FinishedAt, finishedAt}} {
		if t.us != 0 {
			*t.to = fromMicros(t.us)
		}
	}
	return b, nil
}

// readBatches runs query (selecting batchCols) and scans every row.
func (q *Queue) readBatches(ctx context.Context, st statements, query string, args ...any) ([]queue.BatchInfo, error) {
	rows, err := st.Query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []queue.BatchInfo
	for rows.Next() {
		b, err := scanBatch(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, rows.Err()
}

// readBatch reads batch id; errBatchGone if there is none.
func (q *Queue) readBatch(ctx context.Context, st statements, id string) (queue.BatchInfo, error) {
	bs, err := q.readBatches(ctx, st, q.stmt(qBatchByID), id)
	if err != nil {
		return queue.BatchInfo{}, err
	}
	if len(bs) == 0 {
		return queue.BatchInfo{}, errBatchGone
	}
	return bs[0], nil
}

// GetBatch reads batch id (see queue.Batcher): one primary-key read.
func (q *Queue) GetBatch(ctx context.Context, id string) (queue.BatchInfo, error) {
	if err := q.use(ctx); err != nil {
		return queue.BatchInfo{}, err
	}
	b, err := q.readBatch(ctx, stmts(q.db), id)
	if errors.Is(err, errBatchGone) {
		return b, fmt.Errorf("sqlqueue: reading batch %s: %w", id, queue.ErrNotFound)
	}
	if err != nil {
		return b, q.wrap(ctx, err, "reading batch %s", id)
	}
	return b, nil
}

// ListBatches pages through the batches, newest first (see
// queue.Batcher): a range of the seq index, keyset after f.After's seq.
func (q *Queue) ListBatches(ctx context.Context, f queue.BatchFilter) (queue.BatchPage, error) {
	limit, err := queue.BatchLimit(f.Limit)
	if err != nil {
		return queue.BatchPage{}, err
	}
	if err := q.use(ctx); err != nil {
		return queue.BatchPage{}, err
	}
	st := stmts(q.db)
	var bs []queue.BatchInfo
	if f.After == "" {
		bs, err = q.readBatches(ctx, st, q.stmt(qBatches), limit+1)
	} else {
		bs, err = q.readBatches(ctx, st, q.stmt(qBatchesAfter), f.After, limit+1)
	}
	if err != nil {
		return queue.BatchPage{}, q.wrap(ctx, err, "listing batches")
	}
	page := queue.BatchPage{Batches: bs}
	if len(bs) > limit {
		page.Batches = bs[:limit]
		page.Next = bs[limit-1].ID
	}
	return page, nil
}

// BatchMembers pages through batch id's members in job ID order (see
// queue.Batcher): a range of the member table's primary key.
func (q *Queue) BatchMembers(ctx context.Context, id string, f queue.MemberFilter) (queue.MemberPage, error) {
	limit, err := queue.BatchLimit(f.Limit)
	if err != nil {
		return queue.MemberPage{}, err
	}
	if err := q.use(ctx); err != nil {
		return queue.MemberPage{}, err
	}
	page, err := q.batchMembers(ctx, stmts(q.db), id, f, limit)
	if errors.Is(err, errBatchGone) {
		return page, fmt.Errorf("sqlqueue: listing members of batch %s: %w", id, queue.ErrNotFound)
	}
	if err != nil {
		return page, q.wrap(ctx, err, "listing members of batch %s", id)
	}
	return page, nil
}

func (q *Queue) batchMembers(ctx context.Context, st statements, id string, f queue.MemberFilter, limit int) (queue.MemberPage, error) {
	if _, err := q.readBatch(ctx, st, id); err != nil {
		return queue.MemberPage{}, err
	}
	query, args := q.stmt(qMembers), []any{id, f.After, limit + 1}
	if f.State != "" {
		query, args = q.stmt(qMembersInState), []any{id, f.After, string(f.State), limit + 1}
	}
	rows, err := st.Query(ctx, query, args...)
	if err != nil {
		return queue.MemberPage{}, err
	}
	defer rows.Close()
	var out []queue.BatchMember
	for rows.Next() {
		var m queue.BatchMember
		var s string
		if err := rows.Scan(&m.JobID, &s); err != nil {
			return queue.MemberPage{}, err
		}
		m.State = queue.BatchMemberState(s)
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return queue.MemberPage{}, err
	}
	page := queue.MemberPage{Members: out}
	if len(out) > limit {
		page.Members = out[:limit]
		page.Next = out[limit-1].JobID
	}
	return page, nil
}

// allStored marks every job of js stored, for wakeFor.
func allStored(js []queue.Job) []bool {
	out := make([]bool, len(js))
	for i := range out {
		out[i] = true
	}
	return out
}

func countTrue(bs []bool) int {
	n := 0
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}
