package sqlqueue

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	queue "github.com/meridianjobs/meridian/queue/driver"
	"github.com/meridianjobs/meridian/sqlqueue/internal/migrate"
)

// MySQL server error numbers this dialect tells apart (the driver's
// *mysql.MySQLError.Number; see the server's error reference).
const (
	mysqlErDupEntry          = 1062 // ER_DUP_ENTRY
	mysqlErLockDeadlock      = 1213 // ER_LOCK_DEADLOCK
	mysqlErNoSuchTable       = 1146 // ER_NO_SUCH_TABLE
	mysqlErBadDB             = 1049 // ER_BAD_DB_ERROR
	mysqlErAccessDenied      = 1045 // ER_ACCESS_DENIED_ERROR
	mysqlErDBAccessDenied    = 1044 // ER_DBACCESS_DENIED_ERROR
	mysqlErTableAccessDenied = 1142 // ER_TABLEACCESS_DENIED_ERROR
)

// mysqlDialect is MySQL 8.0.1+ and MariaDB 10.6+. Neither has partial
// indexes, and MySQL has no UPDATE ... RETURNING, so: active-job uniqueness
// is a UNIQUE index over a stored generated column that holds the unique key
// only while the job is pending (NULLs never collide); Reserve is a short
// READ COMMITTED transaction that selects with FOR UPDATE SKIP LOCKED and
// then updates by primary key; a batch ack is one DELETE (or UPDATE) by
// primary key whose affected-row count tells whether every lease held, and
// only when one did not is it rolled back and redone locking the rows by
// primary key first, to learn which. IDs, queue names and unique keys are
// VARBINARY (migration 0002) so they compare byte for byte, trailing spaces
// included, as on the other dialects.
type mysqlDialect struct {
	noNotify
	noVacuum
	noFunctions
	poolPush
}

func (mysqlDialect) name() Dialect                         { return MySQL }
func (mysqlDialect) quote(s string) string                 { return "`" + s + "`" }
func (mysqlDialect) rebind(query string) string            { return query }
func (mysqlDialect) maxParams() int                        { return 65535 }
func (mysqlDialect) pushLanes() int                        { return 2 }
func (mysqlDialect) configure(DB)                          {}
func (mysqlDialect) prepare(context.Context, *Queue) error { return nil }

// prepared learns whether the connection reports changed rows, not matched
// ones (no clientFoundRows DSN flag): a no-op update changes no row, so it
// affects one only when the connection counts matched rows. insertJobs
// trusts the affected-row count only in the changed-rows mode. It also
// learns whether the server is MariaDB, whose DELETE ... RETURNING the
// batch ack uses (finishReturning).
func (mysqlDialect) prepared(ctx context.Context, q *Queue) error {
	res, err := q.db.ExecContext(ctx, q.stmt(qChangedRowsProbe))
	if err != nil {
		return err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	q.changedRows.Store(n == 0)
	var version string
	if err := q.db.QueryRowContext(ctx, "SELECT VERSION()").Scan(&version); err != nil {
		return err
	}
	q.deleteReturning.Store(strings.Contains(strings.ToLower(version), "mariadb"))
	return nil
}

// writeTx runs READ COMMITTED transactions: the claim's locking read then
// locks only the rows it returns.
func (mysqlDialect) writeTx(ctx context.Context, q *Queue, fn func(ex execer) error) error {
	return dbTx(ctx, q.db, &sql.TxOptions{Isolation: sql.LevelReadCommitted}, fn)
}

func (mysqlDialect) migrations() *migrate.Dialect { return migrate.MySQL }

// reserve selects with FOR UPDATE SKIP LOCKED, one priority at a time
// (selectThenClaim), then updates by primary key (the rows are clustered
// on id), in one short transaction (qClaimSelect, qClaimUpdate). A claim
// the
// server rolled back to break a deadlock is run again: its locking read
// can wait on the row of a job a batch ack is deleting while holding that
// row's claim-index entry, which the ack needs next (MariaDB 10.11, a few
// times per 200,000-job burn-down). Returned, the error would send the
// Worker into its idle wait with jobs queued.
func (d mysqlDialect) reserve(ctx context.Context, q *Queue, queues []string, max int, now, expires time.Time, token string, inc claimCount) ([]row, error) {
	var rows []row
	err := q.againOnConflict(ctx, func() error {
		return d.writeTx(ctx, q, func(ex execer) error {
			var err error
			rows, err = q.selectThenClaim(ctx, ex, queues, max, now, expires, token, inc, func(r row) any { return r.job.ID })
			return err
		})
	})
	if err != nil {
		return nil, err
	}
	return rows, nil
}

// insertJobs has no RETURNING: the rows the statement inserted are the
// rows with these IDs whose seq is at least the first AUTO_INCREMENT value
// it generated (LastInsertId, 0 when it inserted none). When the
// affected-row count says it inserted every row, no lookup is needed; with
// the clientFoundRows DSN flag (or before use has checked) duplicates may
// count too, so the lookup runs. A statements without a sql.Result (a
// transaction database/sql does not own) compares the IDs present before
// and after instead.
func (mysqlDialect) insertJobs(ctx context.Context, q *Queue, ex statements, js []queue.Job, now time.Time, _, held bool) (map[string]bool, bool, error) {
	inserted, err := insertMySQL(ctx, q, ex, js, now, held)
	if err != nil {
		return nil, false, err
	}
	return inserted, false, nil
}

// insertMySQL is insertJobs' INSERT, and the reading of what it inserted.
func insertMySQL(ctx context.Context, q *Queue, ex statements, js []queue.Job, now time.Time, held bool) (map[string]bool, error) {
	stmt := qInsertJobs
	if held {
		stmt = qInsertJobsHeld
	}
	insert, args := q.stmtN(stmt, len(js)), insertArgs(js, now, held)
	ids := make([]string, len(js))
	for i, j := range js {
		ids[i] = j.ID
	}
	inserted := make(map[string]bool, len(js))
	lookup := func(stmt query, args ...any) error {
		query, args, err := q.stmtIn(stmt, args...)
		if err != nil {
			return err
		}
		got, err := queryStrings(ctx, ex, query, args...)
		for _, id := range got {
			inserted[id] = true
		}
		return err
	}
	s, ok := ex.(sqlStatements)
	if !ok {
		if err := lookup(qJobsInserted, ids); err != nil {
			return nil, err
		}
		before := inserted
		inserted = make(map[string]bool, len(js))
		if _, err := ex.Exec(ctx, insert, args...); err != nil {
			return nil, err
		}
		fresh := slices.DeleteFunc(ids, func(id string) bool { return before[id] })
		if len(fresh) > 0 {
			if err := lookup(qJobsInserted, fresh); err != nil {
				return nil, err
			}
		}
		return inserted, nil
	}
	res, err := s.ex.ExecContext(ctx, insert, args...)
	if err != nil {
		return nil, err
	}
	first, err := res.LastInsertId()
	if err != nil {
		return nil, err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return nil, err
	}
	switch {
	case first == 0:
	case n == int64(len(js)) && q.changedRows.Load():
		for _, j := range js {
			inserted[j.ID] = true
		}
	default:
		if err := lookup(qJobsInsertedSince, ids, first); err != nil {
			return nil, err
		}
	}
	return inserted, nil
}

// errKeyHeld rolls back a revive whose unique key is held.
var errKeyHeld = errors.New("sqlqueue: unique key held")

// revive deletes j's row and inserts j, atomically (qReviveLock,
// qDeleteJob, qInsertJob: AUTO_INCREMENT only counts on INSERT, so an
// UPDATE cannot give the row a new seq): in a savepoint of the caller's
// transaction, or in a transaction of its own.
// The unique index refuses a held key (MySQL cannot name the target table
// in a subquery to check it first, and does not abort the transaction on
// the error).
func (d mysqlDialect) revive(ctx context.Context, q *Queue, ex statements, inTx bool, j queue.Job, keepCreated bool, now time.Time) (bool, error) {
	body := func(ex statements) error {
		var created int64
		var state string
		err := queryRow(ctx, ex, q.stmt(qReviveLock), []any{j.ID}, &created, &state)
		if errors.Is(err, sql.ErrNoRows) {
			return errKeyHeld // revived or replaced meanwhile: not ours
		}
		if err != nil {
			return err
		}
		if _, err := ex.Exec(ctx, q.stmt(qDeleteJob), j.ID); err != nil {
			return err
		}
		if !keepCreated || state != stateDead {
			created = micros(j.CreatedAt)
		}
		insert, args := qInsertJob, appendInsertArgs(nil, j, created, now)
		if len(j.UniqueStates) > 0 {
			insert, args = qInsertJobHeld, append(args, uniqueHold(j))
		}
		_, err = ex.Exec(ctx, q.stmt(insert), args...)
		if d.isUniqueViolation(err) {
			return errKeyHeld
		}
		return err
	}
	var err error
	if inTx {
		if _, err = ex.Exec(ctx, "SAVEPOINT meridian_revive"); err != nil {
			return false, err
		}
		if err = body(ex); err != nil {
			if _, rerr := ex.Exec(ctx, "ROLLBACK TO SAVEPOINT meridian_revive"); rerr != nil {
				return false, rerr
			}
		}
	} else {
		err = d.writeTx(ctx, q, func(ex execer) error { return body(stmts(ex)) })
	}
	if errors.Is(err, errKeyHeld) {
		return false, nil
	}
	return err == nil, err
}

// errSomeLost rolls back a batch ack that finished fewer rows than it had
// leases.
var errSomeLost = errors.New("sqlqueue: some leases were lost")

// finishLeases finishes the rows still under the leases of every part in
// one transaction, one statement per part (its qStartLeases, qAckLeases,
// ... of mysqlWrites: by primary key, the id list leading, and (id, token)
// pairs). When each finished as many rows as its part has leases, every
// lease held; otherwise the transaction is rolled back and redone locking
// the rows still held first (qLockLeases, then qStartByID, ...), to learn
// which leases were lost.
func (d mysqlDialect) finishLeases(ctx context.Context, q *Queue, parts []leaseStmt, now int64) ([]map[queue.Lease]bool, error) {
	ps := make([]mysqlLeases, len(parts))
	for i, p := range parts {
		ids := make([]any, len(p.leases))
		pairs := make([]any, 0, 2*len(p.leases))
		for k, l := range p.leases {
			ids[k] = l.JobID
			pairs = append(pairs, l.JobID, l.Token)
		}
		ps[i] = mysqlLeases{ids, pairs}
	}
	out := make([]map[queue.Lease]bool, len(parts))
	if q.deleteReturning.Load() && finishes(parts) && deletesOnly(parts) {
		err := d.finishReturning(ctx, q, parts, ps, now, out)
		if !errors.Is(err, errPairMismatch) {
			return out, err
		}
	}
	err := d.writeTx(ctx, q, func(ex execer) error {
		for i, p := range parts {
			res, err := ex.ExecContext(ctx, q.stmtN(leaseQueries[p.op].many, len(p.leases)), ps[i].args(p.args, now)...)
			if err != nil {
				return err
			}
			if n, err := res.RowsAffected(); err != nil || n != int64(len(p.leases)) {
				return cmp.Or(err, errSomeLost)
			}
		}
		return nil
	})
	if err == nil {
		for i, p := range parts {
			out[i] = make(map[queue.Lease]bool, len(p.leases))
			for _, l := range p.leases {
				out[i][l] = true
			}
		}
		return out, nil
	}
	if !errors.Is(err, errSomeLost) {
		return nil, err
	}
	err = d.writeTx(ctx, q, func(ex execer) error {
		for i, p := range parts {
			var err error
			if out[i], err = lockAndChange(ctx, q, ex, p, ps[i], now); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err // rolled back: nothing is known to be finished
	}
	return out, nil
}

// mysqlLeases are one finishLeases part's leases as arguments: the IDs
// and the (id, token) pairs.
type mysqlLeases struct {
	ids, pairs []any
}

// args are the arguments of a part's statement that matches its leases:
// before (the change's own), the IDs, the pairs, now.
func (ls mysqlLeases) args(before []any, now int64) []any {
	args := make([]any, 0, len(before)+len(ls.ids)+len(ls.pairs)+1)
	args = append(append(append(args, before...), ls.ids...), ls.pairs...)
	return append(args, now)
}

// lockAndChange locks and reads the rows of one part still under its
// leases (qLockLeases), then changes those by primary key, in the
// caller's transaction ex. It returns the leases it finished.
func lockAndChange(ctx context.Context, q *Queue, ex execer, p leaseStmt, ls mysqlLeases, now int64) (map[queue.Lease]bool, error) {
	done, err := scanFinished(ctx, stmts(ex), q.stmtN(qLockLeases, len(p.leases)), ls.args(nil, now))
	if err != nil || len(done) == 0 {
		return done, err
	}
	in := make([]any, 0, len(p.args)+len(done))
	in = append(in, p.args...)
	for l := range done {
		in = append(in, l.JobID)
	}
	if _, err := ex.ExecContext(ctx, q.stmtN(leaseQueries[p.op].byID, len(done)), in...); err != nil {
		return nil, err
	}
	return done, nil
}

// finishes reports whether a part acks its jobs.
func finishes(parts []leaseStmt) bool {
	for _, p := range parts {
		if p.finish() {
			return true
		}
	}
	return false
}

// deletesOnly reports whether every part that finishes its jobs deletes
// them (no retention of finished jobs).
func deletesOnly(parts []leaseStmt) bool {
	for _, p := range parts {
		if p.op == leaseDone {
			return false
		}
	}
	return true
}

// finishReturning is finishLeases on MariaDB for parts that ack by
// deleting (deletesOnly). An ack part is one DELETE ... RETURNING
// (qAckLeasesReturning), with no locking read first, that matches the
// tokens alone (lease_token IN, beside the id list that finds the rows by
// primary key): comparing (id, token) pairs in SQL costs the server more
// per row than checking them here. The rows it returns are checked here
// against the leases, and a token that is current for a job other than
// the one its lease names (a caller's mistake, never the Worker's) rolls
// everything back with errPairMismatch; the caller then runs the
// statements that match pairs. A part that does not finish (start marks)
// is lockAndChange: as one UPDATE matching the pairs, inside this
// transaction, it made claims come back empty with jobs queued (MariaDB
// 10.11, in half the 200,000-job burn-downs, up to 19 times each; never
// with the locking read first). On error out is cleared: nothing is known
// to be finished.
//
// The deletions count themselves (see ackCounted): the delete trigger
// skips the rows a session deletes while mysqlCountedVar is set
// (migration 0022_ack_counts), and the jobs each deletion returned are
// subtracted from the counts in the same transaction, one upsert for the
// whole ack rather than one per job.
func (d mysqlDialect) finishReturning(ctx context.Context, q *Queue, parts []leaseStmt, ps []mysqlLeases, now int64, out []map[queue.Lease]bool) error {
	err := ackCounted(ctx, q, func(ex execer) error {
		var gone countDelta
		for i, p := range parts {
			if !p.finish() {
				var err error
				if out[i], err = lockAndChange(ctx, q, ex, p, ps[i], now); err != nil {
					return err
				}
				continue
			}
			args := make([]any, 0, 2*len(p.leases)+1)
			args = append(args, ps[i].ids...)
			for _, l := range p.leases {
				args = append(args, l.Token)
			}
			args = append(args, now)
			done, err := scanDeleted(ctx, ex, q.stmtN(qAckLeasesReturning, len(p.leases)), args, &gone)
			if err != nil {
				return err
			}
			if err := checkPairs(p.leases, done); err != nil {
				return err
			}
			out[i] = done
		}
		return gone.subtract(ctx, q, ex)
	})
	if err != nil {
		clear(out)
	}
	return err
}

// mysqlCountedVar is the session variable the delete trigger tests
// (migration 0022_ack_counts): while it is set, the trigger skips the rows
// the session deletes, because the statement that deletes them counts
// them itself.
const mysqlCountedVar = "@meridian_acks_counted"

// ackCounted runs fn in a READ COMMITTED transaction on a connection of
// its own with mysqlCountedVar set, and clears the variable before the
// commit. The variable belongs to the session, not to the transaction:
// when fn fails or the commit does, it is cleared again on the
// connection, and a connection on which that fails too is discarded
// (errBadConn), so that no later statement on it goes uncounted.
func ackCounted(ctx context.Context, q *Queue, fn func(ex execer) error) error {
	conn, err := q.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "SET "+mysqlCountedVar+" = 1"); err != nil {
		return discardUnlessCleared(conn, err)
	}
	tx, err := conn.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return discardUnlessCleared(conn, err)
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return discardUnlessCleared(conn, err)
	}
	if _, err := tx.ExecContext(ctx, "SET "+mysqlCountedVar+" = NULL"); err != nil {
		_ = tx.Rollback()
		return discardUnlessCleared(conn, err)
	}
	return tx.Commit()
}

// discardUnlessCleared clears mysqlCountedVar on conn after err ended an
// ack, or marks conn bad so database/sql closes it, and returns err.
func discardUnlessCleared(conn *sql.Conn, err error) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, cerr := conn.ExecContext(ctx, "SET "+mysqlCountedVar+" = NULL"); cerr != nil {
		_ = conn.Raw(func(any) error { return errBadConn })
	}
	return err
}

// countDelta is what deletions took from the counts: jobs per queue and
// state, and per queue and scheduled bucket (the "at:" states).
type countDelta map[[2]string]int64

// scanDeleted runs qAckLeasesReturning, whose rows are (id, lease_token,
// queue, state, scheduled bucket or NULL), adding each deleted job to
// gone, and returns the leases it finished.
func scanDeleted(ctx context.Context, ex execer, query string, args []any, gone *countDelta) (map[queue.Lease]bool, error) {
	rows, err := ex.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	if *gone == nil {
		*gone = countDelta{}
	}
	done := map[queue.Lease]bool{}
	for rows.Next() {
		var l queue.Lease
		var qn, state string
		var at sql.NullString
		if err := rows.Scan(&l.JobID, &l.Token, &qn, &state, &at); err != nil {
			return nil, err
		}
		done[l] = true
		(*gone)[[2]string{qn, state}]++
		if at.Valid {
			(*gone)[[2]string{qn, at.String}]++
		}
	}
	return done, rows.Err()
}

// subtract takes the deleted jobs from this connection's shard of the
// counts (qSubtractCounts), in the deleting transaction ex.
func (g countDelta) subtract(ctx context.Context, q *Queue, ex execer) error {
	if len(g) == 0 {
		return nil
	}
	args := make([]any, 0, 3*len(g))
	for k, n := range g {
		args = append(args, k[0], k[1], -n)
	}
	_, err := ex.ExecContext(ctx, q.stmtN(qSubtractCounts, len(g)), args...)
	return err
}

func (mysqlDialect) isUniqueViolation(err error) bool {
	n, ok := mysqlErrNumber(err)
	if ok {
		return n == mysqlErDupEntry
	}
	return err != nil && strings.Contains(err.Error(), "Error 1062")
}

// isConfig is a missing table or database or a refused login, bar the
// counts table reported missing by a statement on the jobs table: MariaDB
// (MDEV-26048) fails a statement that runs while another session creates
// a trigger on its table with "table doesn't exist" for the table the
// trigger writes, here the counts table of a counting migration run while
// workers write (MySQL 0018). The statement changed nothing; one run
// again succeeds, so that error is transient, not the end of a Worker.
func (mysqlDialect) isConfig(err error) bool {
	n, _ := mysqlErrNumber(err)
	switch n {
	case mysqlErNoSuchTable:
		return !strings.Contains(err.Error(), "_counts' doesn't exist")
	case mysqlErBadDB, mysqlErAccessDenied, mysqlErDBAccessDenied, mysqlErTableAccessDenied:
		return true
	}
	return false
}

// isConflict is a deadlock: InnoDB rolls back the victim's whole
// transaction (a lock wait timeout rolls back only the statement, so it is
// not one).
func (mysqlDialect) isConflict(err error) bool {
	n, _ := mysqlErrNumber(err)
	return n == mysqlErLockDeadlock
}

// mysqlErrNumber reads the server error number of go-sql-driver/mysql's
// *MySQLError (its Number field) in err's chain. It reads the field by
// reflection so that the core links no database driver (a SQLite-only
// program must not link the MySQL driver: TestDepsSQLiteOnly).
func mysqlErrNumber(err error) (uint64, bool) {
	for e := err; e != nil; e = errors.Unwrap(e) {
		v := reflect.ValueOf(e)
		for v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface {
			if v.IsNil() {
				break
			}
			v = v.Elem()
		}
		if v.Kind() == reflect.Struct {
			if f := v.FieldByName("Number"); f.IsValid() && f.CanUint() {
				return f.Uint(), true
			}
		}
	}
	return 0, false
}

// inspectRead runs the reads on the pool: MySQL plans each statement anew.
func (mysqlDialect) inspectRead(ctx context.Context, q *Queue, _ time.Duration, _ bool, fn func(st statements) error) error {
	return fn(stmts(q.readDB()))
}

// priorities steps the loose scan from Go, one statement per step for
// every queue still stepping (a UNION ALL of one indexed probe per queue):
// MariaDB does not use the index for the correlated step of a recursive
// CTE and reads every row instead, where the steps read a few index
// entries; and not MAX(priority): MariaDB reads every row for
// the MAX of a descending key part.
func (mysqlDialect) priorities(ctx context.Context, q *Queue, st statements, names []string) (map[string][]int64, error) {
	out := make(map[string][]int64, len(names))
	last := map[string]int64{}
	stepping := slices.Clone(names)
	for len(stepping) > 0 {
		parts := make([]string, len(stepping))
		var args []any
		for i, name := range stepping {
			cond := ""
			args = append(args, name)
			if p, ok := last[name]; ok {
				cond = " AND priority < ?"
				args = append(args, p)
			}
			parts[i] = "(SELECT queue, priority FROM " + q.t.jobs + " WHERE queue = ? AND state = 'pending'" + cond + " ORDER BY priority DESC LIMIT 1)"
		}
		rows, err := st.Query(ctx, strings.Join(parts, " UNION ALL "), args...)
		if err != nil {
			return nil, err
		}
		var next []string
		for rows.Next() {
			var name string
			var p int64
			if err := rows.Scan(&name, &p); err != nil {
				rows.Close()
				return nil, err
			}
			out[name], last[name] = append(out[name], p), p
			if len(out[name]) <= maxPriorities {
				next = append(next, name)
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
		stepping = next
	}
	return out, nil
}

// pendingCond is expiryPendingCond, but a scheduled job is one whose
// run_at is still to come, with no test of its lease: the claim index does
// not hold the lease expiry (migration 0013), so the test would look up
// every row a scheduled count or list passes, and it never fails. A claim
// takes only due jobs and leaves run_at as it is, and every statement that
// moves run_at into the future (a nack's or a fail's backoff, a snooze, a
// retry) ends the lease in the same statement.
func (mysqlDialect) pendingCond(s queue.JobState, now int64) (string, []any) {
	if s == queue.StateScheduled {
		return "run_at > ?", []any{now}
	}
	return expiryPendingCond(s, now)
}

// runningList reads the head of the queue's claim order (runningHead: the
// first scan due jobs, runningBound) as primary keys from the claim index
// alone, then looks those rows up by primary key, a chunk at a time in
// claim order, keeping the ones under a lease (cond), until it has n: the
// index does not hold the lease expiry (migration 0013), and the jobs the
// workers hold sit at the head, so a page costs about as many lookups as
// it shows, and at most scan. It also stops once it found as many as the
// workers report holding (held), since a job held by no reporting process
// is not listed (see ListJobs). The part it returns selects the rows it
// found.
func (mysqlDialect) runningList(ctx context.Context, q *Queue, st statements, queueName string, now int64, scan int, held int64, cond string, args []any, order string, n, i int) (string, []any, error) {
	var found []any
	if scan > 0 {
		head, err := queryStrings(ctx, st, runningHead(q.t.jobs, "id"), queueName, now, scan)
		if err != nil {
			return "", nil, err
		}
		for chunk := range slices.Chunk(head, max(2*n, 100)) {
			in := make([]any, len(chunk), len(chunk)+len(args))
			for k, id := range chunk {
				in[k] = id
			}
			ids, err := queryStrings(ctx, st, "SELECT id FROM "+q.t.jobs+" WHERE id IN ("+placeholders(len(chunk))+") AND "+cond, append(in, args...)...)
			if err != nil {
				return "", nil, err
			}
			for _, id := range ids {
				found = append(found, id)
			}
			if len(found) >= min(n, int(held)) {
				break
			}
		}
	}
	if len(found) == 0 {
		return "SELECT * FROM (SELECT " + jobCols + " FROM " + q.t.jobs + " WHERE 1 = 0) b" + strconv.Itoa(i), nil, nil
	}
	return "SELECT * FROM (SELECT " + jobCols + " FROM " + q.t.jobs + " WHERE id IN (" + placeholders(len(found)) + ") ORDER BY " + order + " LIMIT ?) b" + strconv.Itoa(i),
		append(found, n), nil
}

func (mysqlDialect) contains(col string, _ bool) string { return "LOCATE(?, " + col + ") > 0" }

// listFrom names the index of the order: MariaDB reads a range of the
// claim index that starts at a cursor (run_at >= ? AND (run_at > ? OR
// seq > ?) after queue, state and priority) from the start of the
// queue's priority instead of seeking to the cursor, whatever the
// condition's form (a row comparison, optimizer switches and a longer
// ORDER BY did not change it): 1.7M jobs deep that was 11,378 pages and
// 2.7-4.7 s for a window of 100 jobs, against 304 pages and 0.7 ms with
// the index named.
func (d mysqlDialect) listFrom(t tableNames, o listOrder) string {
	index := "_claim"
	if o == byFinish {
		index = "_list"
	}
	return t.jobs + " FORCE INDEX (" + d.quote(t.raw+index) + ")"
}

// foldCounts runs in one write transaction: it locks the
// shards no other transaction holds, adds them up in Go, deletes them and
// adds the sums to shard 0 (MySQL, whose DELETE has no RETURNING).
func (d mysqlDialect) foldCounts(ctx context.Context, q *Queue) error {
	type key struct{ queue, state string }
	return d.writeTx(ctx, q, func(ex execer) error {
		rows, err := ex.QueryContext(ctx, q.stmt(qFoldShards))
		if err != nil {
			return err
		}
		sums := map[key]int64{}
		var shards []any
		for rows.Next() {
			var k key
			var shard, n int64
			if err := rows.Scan(&k.queue, &k.state, &shard, &n); err != nil {
				rows.Close()
				return err
			}
			sums[k] += n
			shards = append(shards, k.queue, k.state, shard)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for chunk := range slices.Chunk(shards, 3*500) {
			if _, err := ex.ExecContext(ctx, q.stmtN(qFoldDelete, len(chunk)/3), chunk...); err != nil {
				return err
			}
		}
		for k, n := range sums {
			if n == 0 {
				continue
			}
			if _, err := ex.ExecContext(ctx, q.stmt(qFoldAdd), k.queue, k.state, n); err != nil {
				return err
			}
		}
		return nil
	})
}

// mysqlWrites are MySQL's (and MariaDB's) statements that write the jobs
// table (claims, the lease-guarded changes, pushes and revivals, dead
// letters and bulk actions) and the few others its operations run: see
// query. Each is whole here; the constants below are parts several of
// them share.
var mysqlWrites = queryTemplates{
	// The claim (reserve): a locking read per priority (byPriority), then
	// an update by primary key (the rows are clustered on id), in one READ
	// COMMITTED transaction.
	qClaimTop:  "SELECT priority FROM {jobs} WHERE queue = ? AND state = 'pending' ORDER BY priority DESC LIMIT 1",
	qClaimNext: "SELECT priority FROM {jobs} WHERE queue = ? AND state = 'pending' AND priority < ? ORDER BY priority DESC LIMIT 1",
	qClaimSelect: "SELECT " + jobCols + " FROM {jobs} WHERE state = 'pending' AND queue IN ({list ?}) AND priority = ? AND run_at <= ? AND lease_expires_at <= ?" +
		" ORDER BY run_at, seq LIMIT ? FOR UPDATE SKIP LOCKED",
	qClaimSelectBelow: "SELECT " + jobCols + " FROM {jobs} WHERE state = 'pending' AND queue IN ({list ?}) AND priority <= ? AND run_at <= ? AND lease_expires_at <= ?" +
		" ORDER BY priority DESC, run_at, seq LIMIT ? FOR UPDATE SKIP LOCKED",
	qClaimSelectFrom: "SELECT " + jobCols + " FROM {jobs} WHERE state = 'pending' AND queue IN ({list ?}) AND priority = ? AND run_at <= ? AND lease_expires_at <= ?" +
		" AND run_at >= ? AND (run_at > ? OR seq > ?) ORDER BY run_at, seq LIMIT ? FOR UPDATE SKIP LOCKED",
	qClaimSelectTo: "SELECT " + jobCols + " FROM {jobs} WHERE state = 'pending' AND queue IN ({list ?}) AND priority = ? AND run_at <= ? AND lease_expires_at <= ?" +
		" AND (run_at < ? OR seq <= ?) ORDER BY run_at, seq LIMIT ? FOR UPDATE SKIP LOCKED",
	qClaimUpdate: "UPDATE {jobs} SET attempts = attempts + CASE WHEN COALESCE(lease_token, '') = '' THEN ? ELSE ? END, lease_token = CONCAT(?, '-', seq), lease_expires_at = ?, updated_at = ?, started_at = ?, worker = ? WHERE id IN ({list ?})",

	// One job under its lease.
	qAckDelete:    "DELETE FROM {jobs} WHERE " + mysqlLeased,
	qAckDone:      "UPDATE {jobs} SET state = 'done', finished_at = ?, updated_at = ? WHERE " + mysqlLeased,
	qRetryLeased:  "UPDATE {jobs} SET history = " + mysqlHistory + ", lease_token = NULL, lease_expires_at = 0, run_at = ?, available_at = ?, last_error = ?, updated_at = ? WHERE " + mysqlLeased,
	qDeadLeased:   "UPDATE {jobs} SET history = " + mysqlHistory + ", state = 'dead', lease_token = NULL, lease_expires_at = 0, last_error = ?, finished_at = ?, updated_at = ?, max_attempts = COALESCE(NULLIF(?, 0), max_attempts) WHERE " + mysqlLeased,
	qCancelLeased: "UPDATE {jobs} SET state = 'cancelled', lease_token = NULL, lease_expires_at = 0, last_error = ?, finished_at = ?, updated_at = ? WHERE " + mysqlLeased,
	qSnoozeLeased: "UPDATE {jobs} SET attempts = CASE WHEN attempts > 0 THEN attempts - 1 ELSE 0 END, snoozes = snoozes + ?, lease_token = NULL, lease_expires_at = 0," +
		" run_at = ?, available_at = ?, updated_at = ? WHERE " + mysqlLeased,

	// Many jobs under their leases (finishLeases): by primary key and
	// (id, token) pairs (the IDs, the pairs, now), their affected-row
	// count telling whether every lease held; when one did not, the rows
	// still held are locked and read (qLockLeases) and changed by primary
	// key (the IDs). On MariaDB an ack is one DELETE ... RETURNING by ID
	// and token lists (the IDs, the tokens, now).
	qStartLeases:  mysqlStartHead + mysqlLeasesWhere,
	qAckLeases:    mysqlAckHead + mysqlLeasesWhere,
	qDoneLeases:   mysqlDoneHead + mysqlLeasesWhere,
	qExtendLeases: mysqlExtendHead + mysqlLeasesWhere,
	qLockLeases:   "SELECT id, lease_token FROM {jobs}" + mysqlLeasesWhere + " FOR UPDATE",
	qStartByID:    mysqlStartHead + " WHERE id IN ({list ?})",
	qAckByID:      mysqlAckHead + " WHERE id IN ({list ?})",
	qDoneByID:     mysqlDoneHead + " WHERE id IN ({list ?})",
	qExtendByID:   mysqlExtendHead + " WHERE id IN ({list ?})",
	// The ack returns what the counts lose with each job (see ackCounted):
	// its queue, its state and, when it is scheduled, its bucket, as the
	// delete trigger would have computed them; qSubtractCounts takes them
	// from this connection's shard.
	qAckLeasesReturning: "DELETE FROM {jobs} WHERE id IN ({list ?}) AND lease_token IN ({list ?}) AND state = 'pending' AND lease_expires_at > ?" +
		" RETURNING id, lease_token, queue, state, CASE WHEN state = 'pending' AND run_at > updated_at THEN CONCAT('at:', run_at DIV 300000000) END",
	qSubtractCounts: "INSERT INTO {counts} (queue, state, shard, n) VALUES {list (?, ?, CONNECTION_ID(), ?)} ON DUPLICATE KEY UPDATE n = n + VALUES(n)",

	// Pushes and revivals. An insert has no RETURNING: what it stored is
	// learned from LastInsertId and the affected rows, or read back.
	qInsertJobs:        "INSERT INTO {jobs} (" + insertCols + ") VALUES {list " + insertRow + "} ON DUPLICATE KEY UPDATE seq = seq",
	qInsertJob:         "INSERT INTO {jobs} (" + insertCols + ") VALUES " + insertRow,
	qInsertJobsHeld:    "INSERT INTO {jobs} (" + heldCols + ") VALUES {list " + heldRow + "} ON DUPLICATE KEY UPDATE seq = seq",
	qInsertJobHeld:     "INSERT INTO {jobs} (" + heldCols + ") VALUES " + heldRow,
	qJobsInserted:      "SELECT id FROM {jobs} WHERE id IN (?)",
	qJobsInsertedSince: "SELECT id FROM {jobs} WHERE id IN (?) AND seq >= ?",
	qReviveLock:        "SELECT created_at, state FROM {jobs} WHERE id = ? AND state <> 'pending' FOR UPDATE",
	qDeleteJob:         "DELETE FROM {jobs} WHERE id = ?",
	qReplaceWaiting:    "DELETE FROM {jobs} WHERE queue = ? AND unique_key = ? AND state = 'pending' AND lease_token IS NULL AND id <> ?",

	// Dead letters, cancels, bulk actions and pruning.
	qRetryDead:        mysqlRetryDead + " WHERE id = ? AND state = 'dead'",
	qRetryDeadIn:      mysqlRetryDead + " WHERE id IN (?) AND state = 'dead'",
	qRetryDeadInNoted: mysqlRetryDead + ", history = " + mysqlAction + " WHERE id IN (?) AND state = 'dead'",
	qAmendRetry:       "UPDATE {jobs} SET history = " + mysqlAction + ", payload = ?, state = 'pending', attempts = 0, available_at = ?, run_at = ?, updated_at = ?, finished_at = 0, lease_token = NULL, lease_expires_at = 0 WHERE id = ? AND state = ?",
	qAmendRunNow:      "UPDATE {jobs} SET history = " + mysqlAction + ", available_at = ?, run_at = ?, updated_at = ? WHERE id = ? AND state = 'pending' AND lease_token IS NULL AND run_at > ?",
	qAmendNote:        "UPDATE {jobs} SET history = " + mysqlAction + " WHERE id = ?",
	qForgetDead:       "DELETE FROM {jobs} WHERE id = ? AND state = 'dead'",
	qForgetDeadIn:     "DELETE FROM {jobs} WHERE id IN (?) AND state = 'dead'",
	qCancelJob:        mysqlCancel + " WHERE id = ? AND state IN ('pending', 'grouped', 'sequenced')",
	qCancelJobsIn:     mysqlCancel + " WHERE id IN (?) AND state IN ('pending', 'grouped', 'sequenced')",
	qDeleteWaitingIn:  "DELETE FROM {jobs} WHERE id IN (?) AND state IN ('pending', 'grouped', 'sequenced') AND lease_token IS NULL",
	qDeleteInState:    "DELETE FROM {jobs} WHERE id IN (?) AND state = ?",
	qDeadIDs:          "SELECT id FROM {jobs} WHERE state = 'dead' LIMIT " + pruneBatchLit,
	qDeadIDsOf:        "SELECT id FROM {jobs} WHERE state = 'dead' AND queue = ? LIMIT " + pruneBatchLit,
	qWaitingIDs:       "SELECT id FROM {jobs} WHERE state IN ('pending', 'grouped', 'sequenced') AND lease_token IS NULL LIMIT " + pruneBatchLit,
	qWaitingIDsOf:     "SELECT id FROM {jobs} WHERE state IN ('pending', 'grouped', 'sequenced') AND lease_token IS NULL AND queue = ? LIMIT " + pruneBatchLit,

	qLeaseEpoch:       "SELECT epoch FROM {meta} WHERE name = ?",
	qLeaseEpochLocked: "SELECT epoch FROM {meta} WHERE name = ? FOR UPDATE",
	qInsertMembers:    "INSERT IGNORE INTO {batch_jobs} (batch_id, job_id, state) VALUES {list (?, ?, 'pending')}",
	qChangedRowsProbe: "UPDATE {meta} SET value = value WHERE name = 'schema_version'",
	qFoldDelete:       "DELETE FROM {counts} WHERE (queue, state, shard) IN ({list (?, ?, ?)})",
}

var (
	// mysqlLeased is the condition of a lease-guarded change of one job:
	// the lease (id, token, now).
	mysqlLeased = "id = ? AND lease_token = ? AND state = 'pending' AND lease_expires_at > ?"

	// mysqlHistory is the history column with the attempt under way
	// appended as it ends (the end time, then the error), the oldest entry
	// dropped (JSON_REMOVE of $[0]) once it holds queue.MaxHistory: a JSON
	// array of historyEntry. It reads attempts, started_at and worker as
	// the row has them, so it comes first in its SET list (MySQL assigns
	// left to right, each assignment seeing the ones before).
	mysqlHistory = `JSON_ARRAY_APPEND(CASE WHEN history IS NULL OR history = '' THEN '[]' WHEN JSON_LENGTH(history) >= ` + maxHistoryLit +
		` THEN JSON_REMOVE(history, '$[0]') ELSE history END, '$', JSON_OBJECT('a', attempts, 's', started_at, 'f', ?, 'e', ?, 'w', worker))`

	// mysqlAction is the history column with an operator's action
	// appended (at, by, what), the oldest entry dropped once it holds
	// queue.MaxHistory, as mysqlHistory does for attempts.
	mysqlAction = `JSON_ARRAY_APPEND(CASE WHEN history IS NULL OR history = '' THEN '[]' WHEN JSON_LENGTH(history) >= ` + maxHistoryLit +
		` THEN JSON_REMOVE(history, '$[0]') ELSE history END, '$', JSON_OBJECT('t', ?, 'by', ?, 'do', ?))`

	// The heads of the changes of many jobs under their leases: a start
	// mark (now, now), an ack that deletes (none), one that keeps the job
	// as done (now, now), an extension (expiry, now). updated_at always
	// changes in a start mark and an extension, so MySQL's count of
	// changed rows is the count of leases that held.
	mysqlStartHead  = "UPDATE {jobs} SET attempts = attempts + 1, updated_at = GREATEST(updated_at + 1, ?), started_at = ?"
	mysqlAckHead    = "DELETE FROM {jobs}"
	mysqlDoneHead   = "UPDATE {jobs} SET state = 'done', finished_at = ?, updated_at = ?"
	mysqlExtendHead = "UPDATE {jobs} SET lease_expires_at = ?, updated_at = GREATEST(updated_at + 1, ?)"
	// mysqlLeasesWhere finds the rows by primary key (the ID list leads)
	// and requires each one's (id, token) pair and an unexpired lease.
	mysqlLeasesWhere = " WHERE id IN ({list ?}) AND (id, lease_token) IN ({list (?, ?)}) AND state = 'pending' AND lease_expires_at > ?"

	// mysqlRetryDead makes dead letters pending again, available now (now,
	// now, now), attempts reset; mysqlCancel cancels jobs (now, now, the
	// error recorded).
	mysqlRetryDead = "UPDATE {jobs} SET state = 'pending', attempts = 0, available_at = ?, run_at = ?, updated_at = ?, finished_at = 0, lease_token = NULL, lease_expires_at = 0"
	mysqlCancel    = "UPDATE {jobs} SET state = 'cancelled', finished_at = ?, updated_at = ?, last_error = ?"
)
