package sqlqueue

import (
	"context"
	"strconv"
)

// MySQL keeps its counts table by statement, not by trigger (migrations
// 0010, 0015 and 0016): a row trigger fires once per row a statement
// writes, and each firing cost MariaDB about as much as the write of a
// small row, so that the triggers alone took a tenth of a burn-down's
// claims and acks. Each statement that changes the rows the counts table
// counts adds the difference itself, in its own transaction: pushes count
// what they insert (insertJobs, revive), the batch ack what it finishes
// (finishCounted, finishReturning), the claim the scheduled jobs it takes
// (countClaimed), and every other UPDATE or DELETE of jobs goes through
// changeJobs. A row changed by hand, or by an older release's process, is
// not counted (docs/operations.md names the statements that count again).

// countedCols are the columns of a job's row that the counts table counts
// (countedRow), after its id.
const countedCols = "id, queue, state, run_at, updated_at"

// changeJobs counts what c changes itself: in one transaction it locks
// and reads the rows c will change (countedCols), changes those rows (by
// primary key, still under c's condition), reads them again when c
// updates them, and adds the difference to this connection's shard of the
// counts. On the pool the transaction is its own, run again from the
// start when the server broke a deadlock with it; otherwise it is st's.
func (d mysqlDialect) changeJobs(ctx context.Context, q *Queue, st statements, c jobChange) (int64, error) {
	if c.leased && (!c.deletes() || q.deleteReturning.Load()) {
		return d.changeLeased(ctx, q, st, c)
	}
	if onPool(st) {
		var n int64
		err := q.againOnConflict(ctx, func() error {
			return d.writeTx(ctx, q, func(tx execer) error {
				var err error
				n, err = d.changeJobs(ctx, q, stmts(tx), c)
				return err
			})
		})
		return n, err
	}
	before, err := readCounted(ctx, q, st, "SELECT "+countedCols+" FROM {jobs} WHERE "+c.where+" FOR UPDATE", c.whereArgs)
	if err != nil || len(before) == 0 {
		return 0, err
	}
	ids := make([]any, len(before))
	for i, r := range before {
		ids[i] = r.id
	}
	// One ID keeps the statement in the cache; a list expands (sqlIn).
	in, inArg := "id = ?", ids[0]
	if len(ids) > 1 {
		in, inArg = "id IN (?)", ids
	}
	stmt, args, err := q.bind(c.head+" WHERE "+in+" AND ("+c.where+")", append(append(append(make([]any, 0, len(c.headArgs)+1+len(c.whereArgs)), c.headArgs...), inArg), c.whereArgs...))
	if err != nil {
		return 0, err
	}
	n, err := st.Exec(ctx, stmt, args...)
	if err != nil {
		return 0, err
	}
	deltas := make(map[countKey]int64, 4)
	for _, r := range before {
		countRow(deltas, r.countedRow, -1)
	}
	if !c.deletes() {
		after, err := readCounted(ctx, q, st, "SELECT "+countedCols+" FROM {jobs} WHERE "+in, []any{inArg})
		if err != nil {
			return 0, err
		}
		for _, r := range after {
			countRow(deltas, r.countedRow, 1)
		}
	}
	return n, q.addCounts(ctx, st, deltas, "CONNECTION_ID()", mysqlUpsert)
}

// changeLeased is changeJobs for a change of the one job under a lease
// (c.leased), in fewer statements, since the row's count before is known
// ((queue, pending), no bucket): an UPDATE runs first, under the lease,
// and when it changed the row one INSERT ... SELECT counts it, reading
// its queue and its new state and bucket from the row it holds locked; a
// DELETE is MariaDB's DELETE ... RETURNING queue and one upsert (MySQL's
// DELETE has no RETURNING: changeJobs' locking read there). On the pool
// the transaction is its own, at the server's default isolation (one
// round trip fewer than writeTx's READ COMMITTED, and the same locks: the
// statements find the row by primary key). A Nack on MariaDB: 4 round
// trips instead of the locking path's 7 (BenchmarkNack).
func (d mysqlDialect) changeLeased(ctx context.Context, q *Queue, st statements, c jobChange) (int64, error) {
	if onPool(st) {
		var n int64
		err := q.againOnConflict(ctx, func() error {
			return dbTx(ctx, q.db, nil, func(tx execer) error {
				var err error
				n, err = d.changeLeased(ctx, q, stmts(tx), c)
				return err
			})
		})
		return n, err
	}
	query, args, err := q.statement(c)
	if err != nil {
		return 0, err
	}
	id := c.whereArgs[0] // leaseGuard starts with the job's ID
	if c.deletes() {
		rows, err := queryStrings(ctx, st, q.sql(query+" RETURNING queue"), args...)
		if err != nil || len(rows) == 0 {
			return 0, err
		}
		deltas := make(map[countKey]int64, 1)
		for _, name := range rows {
			deltas[countKey{name, statePending}]--
		}
		return int64(len(rows)), q.addCounts(ctx, st, deltas, "CONNECTION_ID()", mysqlUpsert)
	}
	n, err := st.Exec(ctx, query, args...)
	if err != nil || n == 0 {
		return n, err
	}
	_, err = st.Exec(ctx, q.sql(`INSERT INTO {counts} (queue, state, shard, n)
SELECT queue, state, CONNECTION_ID(), 1 FROM {jobs} WHERE id = ?
UNION ALL SELECT queue, CONCAT('`+schedPrefix+`', run_at DIV `+strconv.Itoa(schedBucket)+`), CONNECTION_ID(), 1 FROM {jobs} WHERE id = ? AND state = 'pending' AND run_at > updated_at
UNION ALL SELECT queue, 'pending', CONNECTION_ID(), -1 FROM {jobs} WHERE id = ?
`+mysqlUpsert), id, id, id)
	return n, err
}

// idRow is a countedRow with its job's ID.
type idRow struct {
	id string
	countedRow
}

// readCounted runs a query of countedCols (tmpl with args, see bind) and
// reads every row.
func readCounted(ctx context.Context, q *Queue, st statements, tmpl string, args []any) ([]idRow, error) {
	query, args, err := q.bind(tmpl, args)
	if err != nil {
		return nil, err
	}
	rows, err := st.Query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []idRow
	for rows.Next() {
		var r idRow
		if err := rows.Scan(&r.id, &r.queue, &r.state, &r.runAt, &r.updatedAt); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// countClaimed is the claim's count (claimStatements.count): a claim
// changes no job's state, but it moves updated_at to now, past the run_at
// of every job it takes, so the jobs written to run later that it takes
// (run_at after updated_at, now due) leave their scheduled buckets. Most
// claims take none and write nothing.
func countClaimed(ctx context.Context, q *Queue, ex execer, claimed []row, now int64) error {
	var deltas map[countKey]int64
	for _, r := range claimed {
		if r.dueAt > r.updatedAt {
			if deltas == nil {
				deltas = make(map[countKey]int64, 2)
			}
			countRow(deltas, countedRow{r.job.Queue, statePending, r.dueAt, r.updatedAt}, -1)
			countRow(deltas, countedRow{r.job.Queue, statePending, r.dueAt, now}, 1)
		}
	}
	if deltas == nil {
		return nil
	}
	return q.addCounts(ctx, stmts(ex), deltas, "CONNECTION_ID()", mysqlUpsert)
}
