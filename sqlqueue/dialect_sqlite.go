package sqlqueue

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"time"

	queue "github.com/meridianjobs/meridian/queue/driver"
	"github.com/meridianjobs/meridian/sqlqueue/internal/migrate"
)

// SQLite result codes this dialect tells apart (extended codes where the
// driver reports them; see https://sqlite.org/rescode.html).
const (
	sqliteError                = 1    // SQLITE_ERROR: "no such table" among others
	sqlitePerm                 = 3    // SQLITE_PERM
	sqliteBusy                 = 5    // SQLITE_BUSY
	sqliteCantOpen             = 14   // SQLITE_CANTOPEN
	sqliteAuth                 = 23   // SQLITE_AUTH
	sqliteNotADB               = 26   // SQLITE_NOTADB
	sqliteConstraintPrimaryKey = 1555 // SQLITE_CONSTRAINT_PRIMARYKEY
	sqliteConstraintUnique     = 2067 // SQLITE_CONSTRAINT_UNIQUE
)

// sqliteDialect is SQLite 3.35+ (RETURNING, partial indexes). SQLite has
// one writer: New limits the pool to one connection, writes that span
// statements run in BEGIN IMMEDIATE transactions, the file is switched to
// WAL and a busy timeout makes other processes wait for the lock instead of
// failing.
type sqliteDialect struct {
	noNotify
	noVacuum
	noFunctions
	searchPrunedInPlace
}

func (sqliteDialect) name() Dialect              { return SQLite }
func (sqliteDialect) quote(s string) string      { return quoteDouble(s) }
func (sqliteDialect) rebind(query string) string { return query }
func (sqliteDialect) maxParams() int             { return 32766 }
func (sqliteDialect) pushLanes() int             { return 1 }

// configure limits db to one open connection: SQLite has one writer, and
// one connection makes the process's writers queue in Go instead of
// failing with "database is locked".
func (sqliteDialect) configure(db DB) { db.SetMaxOpenConns(1) }

// sqlitePragmas are the per-connection settings of SQLite.
const sqlitePragmas = "PRAGMA busy_timeout=30000; PRAGMA synchronous=NORMAL; PRAGMA temp_store=MEMORY"

// prepare sets the connection's busy timeout, synchronous mode and temp
// store. They belong to the one connection New allowed; writeTx sets them
// again for a connection the pool may have replaced. synchronous=NORMAL
// is WAL's recommended setting: durable across process crashes, one fsync
// per checkpoint instead of per commit. temp_store=MEMORY keeps statement
// journals in memory: a batch statement inside a write transaction on a
// table with triggers journals every page it changes, and past 64 KiB
// SQLite spilled that journal to a temporary file (a 600-row ack does),
// a cost on every large batch. Temporary tables and large sorts are
// held in memory too; the queue's own statements make none that grow with
// the table.
func (sqliteDialect) prepare(ctx context.Context, q *Queue) error {
	_, err := q.db.ExecContext(ctx, sqlitePragmas)
	return err
}

// prepared switches the file to WAL once its tables are known to be the
// queue's, so that opening a file that is not a queue database (or one
// without tables, with setup=false) leaves it as it was. journal_mode is a
// property of the file: this runs once per file in practice.
//
// SQLite does not call the busy handler for the lock a journal-mode switch
// needs when another connection holds the file (it could deadlock), so two
// processes opening a new file at once can see SQLITE_BUSY there whatever
// the timeout: the switch is retried while the file is busy, within the
// busy timeout, and skipped once another connection has made the file WAL.
func (sqliteDialect) prepared(ctx context.Context, q *Queue) error {
	deadline := time.Now().Add(30 * time.Second)
	for delay := time.Millisecond; ; delay = min(2*delay, 100*time.Millisecond) {
		var mode string
		err := q.db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode)
		if err == nil && strings.EqualFold(mode, "wal") {
			return nil
		}
		if err == nil {
			_, err = q.db.ExecContext(ctx, "PRAGMA journal_mode=WAL")
		}
		if code, ok := sqliteCode(err); err == nil || !ok || code&0xff != sqliteBusy || time.Now().After(deadline) {
			return err
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// writeTx runs fn in BEGIN IMMEDIATE on one connection, so the write lock
// is taken up front and a busy writer is waited for, not failed.
func (sqliteDialect) writeTx(ctx context.Context, q *Queue, fn func(ex execer) error) (err error) {
	conn, err := q.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, sqlitePragmas); err != nil {
		return err
	}
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return err
	}
	if err = fn(conn); err == nil {
		if _, err = conn.ExecContext(ctx, "COMMIT"); err == nil {
			return nil
		}
	}
	// Roll back even when ctx is done; if that fails the connection may
	// still hold the transaction, so it is discarded rather than pooled.
	if _, rerr := conn.ExecContext(context.Background(), "ROLLBACK"); rerr != nil && !strings.Contains(rerr.Error(), "no transaction is active") {
		_ = conn.Raw(func(any) error { return errBadConn })
	}
	return err
}

// pushBatch runs a push of several jobs in one write transaction: one
// fsync for the batch.
func (d sqliteDialect) pushBatch(ctx context.Context, q *Queue, n, _ int, fn func(ex statements, inTx bool) error) error {
	if n < 2 {
		return fn(stmts(q.db), false)
	}
	return d.writeTx(ctx, q, func(ex execer) error { return fn(stmts(ex), true) })
}

func (sqliteDialect) migrations() *migrate.Dialect { return migrate.SQLite }

// reserve looks before taking the one write lock (anyReady), so idle
// pollers in other processes do not queue behind each other, then selects
// (selectThenClaim) and updates by
// seq, the rowid, in one BEGIN IMMEDIATE transaction: by id every row
// costs a probe of the id index first.
func (d sqliteDialect) reserve(ctx context.Context, q *Queue, queues []string, max int, now, expires time.Time, token string, inc claimCount) ([]row, error) {
	ready, err := q.anyReady(ctx, stmts(q.db), queues, micros(now))
	if err != nil || !ready {
		return nil, err
	}
	var rows []row
	lease := expires.Sub(now)
	err = d.writeTx(ctx, q, func(ex execer) error {
		// The clock is read again once the write lock is held: waiting
		// for it (another writer's long transaction) must not use up the
		// lease handed out, nor let the claim take a job whose lease
		// expired meanwhile by the old clock only.
		now := time.Now()
		var err error
		rows, err = q.selectThenClaim(ctx, ex, queues, max, now, now.Add(lease), token, inc, func(r row) any { return r.seq })
		return err
	})
	return rows, err
}

func (sqliteDialect) insertJobs(ctx context.Context, q *Queue, ex statements, js []queue.Job, now time.Time, _, held bool) (map[string]bool, bool, error) {
	stmt := qInsertJobs
	if held {
		stmt = qInsertJobsHeld
	}
	return insertReturning(ctx, ex, q.stmtN(stmt, len(js)), insertArgs(js, now, held))
}

// revive updates the row in place, after the last seq; the unique key is
// checked in the statement.
func (sqliteDialect) revive(ctx context.Context, q *Queue, ex statements, _ bool, j queue.Job, keepCreated bool, now time.Time) (bool, error) {
	return q.reviveInPlace(ctx, ex, j, keepCreated, now)
}

// finishLeases runs one statement per part in one BEGIN IMMEDIATE
// transaction (one commit). The row triggers count the jobs it finishes:
// on SQLite a trigger's upsert costs about what counting the rows here
// would (BenchmarkAckManyCounts), so, unlike MySQL's, this batch ack
// leaves the counting to them.
//
// Each part first runs by token alone (its qStartLeases, qAckLeases, ...
// of sqliteWrites: see sqliteByToken): every lease token
// ends in its row's seq (reserve's token), so the statement walks the
// tokens, finds each row by rowid and compares its token, with no
// temporary index of (id, token) pairs to build (a third of a start
// mark's cost and a quarter of an ack's). The IDs are checked here against
// the rows it returns: a token that is current for a row whose ID is not
// the one its lease names (a caller's mistake, never the Worker's) rolls
// the whole transaction back, and it is run again matching each (id,
// token) pair in SQL (qStartLeasesPairs, ...: see sqliteByPair).
func (d sqliteDialect) finishLeases(ctx context.Context, q *Queue, parts []leaseStmt, now int64) ([]map[queue.Lease]bool, error) {
	out := make([]map[queue.Lease]bool, len(parts))
	err := d.writeTx(ctx, q, func(ex execer) error {
		for i, p := range parts {
			done := make(map[queue.Lease]bool, len(p.leases))
			err := scanLeases(ctx, stmts(ex), done, q.stmt(leaseQueries[p.op].many), append(slices.Clip(p.args), jsonTokens(p.leases), now)...)
			if err != nil {
				return err
			}
			if err := checkPairs(p.leases, done); err != nil {
				return err
			}
			out[i] = done
		}
		return nil
	})
	if errors.Is(err, errPairMismatch) {
		err = d.writeTx(ctx, q, func(ex execer) error {
			for i, p := range parts {
				var err error
				if out[i], err = q.finishByArrays(ctx, stmts(ex), leaseQueries[p.op].pairs, p.leases, now, p.args); err != nil {
					return err
				}
			}
			return nil
		})
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}

// jsonTokens is the JSON array of the leases' tokens.
func jsonTokens(leases []queue.Lease) string {
	toks := make([]string, len(leases))
	for i, l := range leases {
		toks[i] = l.Token
	}
	b, _ := json.Marshal(toks) // strings cannot fail to marshal
	return string(b)
}

// sqliteCode is the (extended) result code of a driver error that reports
// one (modernc.org/sqlite's Code()).
func sqliteCode(err error) (int, bool) {
	var c interface{ Code() int }
	if errors.As(err, &c) {
		return c.Code(), true
	}
	return 0, false
}

func (sqliteDialect) isUniqueViolation(err error) bool {
	if code, ok := sqliteCode(err); ok {
		return code == sqliteConstraintUnique || code == sqliteConstraintPrimaryKey
	}
	return err != nil && strings.Contains(err.Error(), "UNIQUE constraint failed")
}

// isConfig matches a file that cannot be opened or is no database, refused
// access, and a missing table (a generic SQLITE_ERROR told by its message).
// isConflict is never true: SQLite has one writer, and a busy file is
// waited for (busy_timeout), not a deadlock.
func (sqliteDialect) isConflict(error) bool { return false }

func (sqliteDialect) isConfig(err error) bool {
	code, ok := sqliteCode(err)
	switch {
	case !ok:
		return false
	case code&0xff == sqliteCantOpen, code&0xff == sqliteNotADB, code&0xff == sqliteAuth, code&0xff == sqlitePerm:
		return true
	case code == sqliteError:
		return strings.Contains(err.Error(), "no such table")
	}
	return false
}

func (sqliteDialect) inspectRead(ctx context.Context, q *Queue, _ time.Duration, _ bool, fn func(st statements) error) error {
	return fn(stmts(q.readDB()))
}

func (sqliteDialect) priorities(ctx context.Context, q *Queue, st statements, names []string) (map[string][]int64, error) {
	return q.prioritiesEach(ctx, st, names)
}

func (sqliteDialect) pendingCond(s queue.JobState, now int64) (string, []any) {
	return expiryPendingCond(s, now)
}

// runningList reads the head of the claim order from the claim index
// alone, which ends in lease_expires_at, and only the running jobs' rows
// by seq. The running jobs' seqs are a derived table joined to the jobs,
// not an IN list.
func (sqliteDialect) runningList(_ context.Context, q *Queue, _ statements, queueName string, now int64, scan int, _ int64, cond string, args []any, order string, n, i int) (string, []any, error) {
	return "SELECT * FROM (SELECT " + jobCols + " FROM (SELECT seq AS rseq FROM (" + runningHead(q.t.jobs, "seq, lease_expires_at AS x") +
			") h WHERE x > ?) r JOIN " + q.t.jobs + " ON seq = r.rseq WHERE " + cond + " ORDER BY " + order + " LIMIT ?) b" + strconv.Itoa(i),
		append(append([]any{queueName, now, scan, now}, args...), n), nil
}

func (sqliteDialect) contains(col string, _ bool) string { return "instr(" + col + ", ?) > 0" }

// listFrom is the jobs table: the planner finds the index of the order
// from the cursor's bounds.
func (sqliteDialect) listFrom(t tableNames, _ listOrder) string { return t.jobs }

// foldCounts has nothing to do: SQLite's triggers write shard 0 only.
func (sqliteDialect) foldCounts(context.Context, *Queue) error { return nil }

// sqliteWrites are SQLite's statements that write the jobs table (claims,
// the lease-guarded changes, pushes and revivals, dead letters and bulk
// actions) and the few others its operations run: see query. Each is
// whole here; the constants and the two functions below are parts
// several of them share.
var sqliteWrites = queryTemplates{
	// The claim (reserve): a look before taking the write lock (anyReady),
	// then a select per priority (byPriority) and an update by seq, the
	// rowid, in one BEGIN IMMEDIATE transaction.
	// Every read of the claim names the claim index, whatever the
	// statistics: without them (a table never analyzed) SQLite chose the
	// list index on (state, queue) and read every pending row's heap
	// record to test run_at, so a probe that finds nothing due cost a
	// lookup per scheduled job (20,000 scheduled: 11-119 ms against 2 ms;
	// issue 32 item 3).
	qClaimTop:         "SELECT priority FROM {jobs} INDEXED BY {claim_idx} WHERE queue = ? AND state = 'pending' ORDER BY priority DESC LIMIT 1",
	qClaimNext:        "SELECT priority FROM {jobs} INDEXED BY {claim_idx} WHERE queue = ? AND state = 'pending' AND priority < ? ORDER BY priority DESC LIMIT 1",
	qClaimSelect:      "SELECT " + jobCols + " FROM {jobs} INDEXED BY {claim_idx} WHERE state = 'pending' AND queue IN ({list ?}) AND priority = ? AND run_at <= ? AND lease_expires_at <= ? ORDER BY run_at, seq LIMIT ?",
	qClaimSelectBelow: "SELECT " + jobCols + " FROM {jobs} INDEXED BY {claim_idx} WHERE state = 'pending' AND queue IN ({list ?}) AND priority <= ? AND run_at <= ? AND lease_expires_at <= ? ORDER BY priority DESC, run_at, seq LIMIT ?",
	qClaimUpdate:      "UPDATE {jobs} SET attempts = attempts + CASE WHEN COALESCE(lease_token, '') = '' THEN ? ELSE ? END, lease_token = ? || '-' || seq, lease_expires_at = ?, updated_at = ?, started_at = ?, worker = ? WHERE seq IN ({list ?})",

	// One job under its lease.
	qAckDelete:    "DELETE FROM {jobs} WHERE " + sqliteLeased,
	qAckDone:      "UPDATE {jobs} SET state = 'done', finished_at = ?, updated_at = ? WHERE " + sqliteLeased,
	qRetryLeased:  "UPDATE {jobs} SET history = " + sqliteHistory + ", lease_token = NULL, lease_expires_at = 0, run_at = ?, available_at = ?, last_error = ?, updated_at = ? WHERE " + sqliteLeased,
	qDeadLeased:   "UPDATE {jobs} SET history = " + sqliteHistory + ", state = 'dead', lease_token = NULL, lease_expires_at = 0, last_error = ?, finished_at = ?, updated_at = ?, max_attempts = COALESCE(NULLIF(?, 0), max_attempts) WHERE " + sqliteLeased,
	qCancelLeased: "UPDATE {jobs} SET state = 'cancelled', lease_token = NULL, lease_expires_at = 0, last_error = ?, finished_at = ?, updated_at = ? WHERE " + sqliteLeased,
	qSnoozeLeased: "UPDATE {jobs} SET attempts = CASE WHEN attempts > 0 THEN attempts - 1 ELSE 0 END, snoozes = snoozes + ?, lease_token = NULL, lease_expires_at = 0," +
		" run_at = ?, available_at = ?, updated_at = ? WHERE " + sqliteLeased,

	// Many jobs under their leases (finishLeases): by token (the tokens
	// as a JSON array, then now), and matching each (id, token) pair
	// (IDs and tokens as two text-array literals, then now). The
	// parameters are numbered.
	qStartLeases:       sqliteByToken(sqliteStartHead, 2),
	qAckLeases:         sqliteByToken(sqliteAckHead, 0),
	qDoneLeases:        sqliteByToken(sqliteDoneHead, 2),
	qExtendLeases:      sqliteByToken(sqliteExtendHead, 2),
	qStartLeasesPairs:  sqliteByPair(sqliteStartHead, 2),
	qAckLeasesPairs:    sqliteByPair(sqliteAckHead, 0),
	qDoneLeasesPairs:   sqliteByPair(sqliteDoneHead, 2),
	qExtendLeasesPairs: sqliteByPair(sqliteExtendHead, 2),

	// Pushes and revivals.
	qInsertJobs:     "INSERT INTO {jobs} (" + insertCols + ") VALUES {list " + insertRow + "} ON CONFLICT DO NOTHING RETURNING id",
	qInsertJobsHeld: "INSERT INTO {jobs} (" + heldCols + ") VALUES {list " + heldRow + "} ON CONFLICT DO NOTHING RETURNING id",
	qRevive: `UPDATE {jobs} SET seq = (SELECT MAX(seq) + 1 FROM {jobs}), queue = ?, name = ?, payload = ?, priority = ?, attempts = 0,
  max_attempts = ?, timeout_us = ?, unique_key = ?, tags = ?, meta = ?, available_at = ?, run_at = ?, updated_at = ?,
  created_at = CASE WHEN state = 'dead' AND ? = 1 THEN created_at ELSE ? END,
  finished_at = 0, last_error = '', lease_token = NULL, lease_expires_at = 0, snoozes = 0, retry_until = ?, state = 'pending'
WHERE id = ? AND state <> 'pending' AND NOT EXISTS (SELECT 1 FROM {jobs} o WHERE o.queue = ? AND o.unique_key = ? AND o.state = 'pending')`,
	qReviveHeld: `UPDATE {jobs} SET seq = (SELECT MAX(seq) + 1 FROM {jobs}), queue = ?, name = ?, payload = ?, priority = ?, attempts = 0,
  max_attempts = ?, timeout_us = ?, unique_key = ?, tags = ?, meta = ?, available_at = ?, run_at = ?, updated_at = ?,
  created_at = CASE WHEN state = 'dead' AND ? = 1 THEN created_at ELSE ? END,
  finished_at = 0, last_error = '', lease_token = NULL, lease_expires_at = 0, snoozes = 0, retry_until = ?, state = 'pending', unique_hold = ?
WHERE id = ? AND state <> 'pending' AND NOT EXISTS (SELECT 1 FROM {jobs} o WHERE o.queue = ? AND o.unique_key = ? AND o.id <> ?
  AND (o.state = 'pending' OR instr(o.unique_hold, ',' || o.state || ',') > 0))`,
	qReplaceWaiting: "DELETE FROM {jobs} WHERE queue = ? AND unique_key = ? AND state = 'pending' AND lease_token IS NULL AND id <> ?",

	// Dead letters, cancels, bulk actions and pruning.
	qRetryDead:        sqliteRetryDead + " WHERE id = ? AND state = 'dead'",
	qRetryDeadIn:      sqliteRetryDead + " WHERE id IN (?) AND state = 'dead'",
	qRetryDeadInNoted: sqliteRetryDead + ", history = " + sqliteAction + " WHERE id IN (?) AND state = 'dead'",
	qAmendRetry:       "UPDATE {jobs} SET history = " + sqliteAction + ", payload = ?, state = 'pending', attempts = 0, available_at = ?, run_at = ?, updated_at = ?, finished_at = 0, lease_token = NULL, lease_expires_at = 0 WHERE id = ? AND state = ?",
	qAmendRunNow:      "UPDATE {jobs} SET history = " + sqliteAction + ", available_at = ?, run_at = ?, updated_at = ? WHERE id = ? AND state = 'pending' AND lease_token IS NULL AND run_at > ?",
	qAmendNote:        "UPDATE {jobs} SET history = " + sqliteAction + " WHERE id = ?",
	qForgetDead:       "DELETE FROM {jobs} WHERE id = ? AND state = 'dead'",
	qForgetDeadIn:     "DELETE FROM {jobs} WHERE id IN (?) AND state = 'dead'",
	qCancelJob:        sqliteCancel + " WHERE id = ? AND state IN ('pending', 'grouped', 'sequenced')",
	qCancelJobsIn:     sqliteCancel + " WHERE id IN (?) AND state IN ('pending', 'grouped', 'sequenced')",
	qDeleteWaitingIn:  "DELETE FROM {jobs} WHERE id IN (?) AND state IN ('pending', 'grouped', 'sequenced') AND lease_token IS NULL",
	qDeleteInState:    "DELETE FROM {jobs} WHERE id IN (?) AND state = ?",
	qDeadIDs:          "SELECT id FROM {jobs} WHERE state = 'dead' LIMIT " + pruneBatchLit,
	qDeadIDsOf:        "SELECT id FROM {jobs} WHERE state = 'dead' AND queue = ? LIMIT " + pruneBatchLit,
	qWaitingIDs:       "SELECT id FROM {jobs} WHERE state IN ('pending', 'grouped', 'sequenced') AND lease_token IS NULL LIMIT " + pruneBatchLit,
	qWaitingIDsOf:     "SELECT id FROM {jobs} WHERE state IN ('pending', 'grouped', 'sequenced') AND lease_token IS NULL AND queue = ? LIMIT " + pruneBatchLit,

	// The lease row's epoch: the write transaction holds the whole
	// database's write lock, so the read needs no lock of its own.
	qLeaseEpoch:       "SELECT epoch FROM {meta} WHERE name = ?",
	qLeaseEpochLocked: "SELECT epoch FROM {meta} WHERE name = ?",
	qInsertMembers:    "INSERT OR IGNORE INTO {batch_jobs} (batch_id, job_id, state) VALUES {list (?, ?, 'pending')}",
}

var (
	// sqliteLeased is the condition of a lease-guarded change of one job:
	// the lease (id, token, now).
	sqliteLeased = "id = ? AND lease_token = ? AND state = 'pending' AND lease_expires_at > ?"

	// sqliteHistory is the history column with the attempt under way
	// appended as it ends (the end time, then the error), the oldest entry
	// dropped (json_remove of $[0]) once it holds queue.MaxHistory: a JSON
	// array of historyEntry. It reads attempts, started_at and worker as
	// the row has them.
	sqliteHistory = `json_insert(CASE WHEN history IS NULL OR history = '' THEN '[]' WHEN json_array_length(history) >= ` + maxHistoryLit +
		` THEN json_remove(history, '$[0]') ELSE history END, '$[#]', json_object('a', attempts, 's', started_at, 'f', ?, 'e', ?, 'w', worker))`

	// sqliteAction is the history column with an operator's action
	// appended (at, by, what), the oldest entry dropped once it holds
	// queue.MaxHistory, as sqliteHistory does for attempts.
	sqliteAction = `json_insert(CASE WHEN history IS NULL OR history = '' THEN '[]' WHEN json_array_length(history) >= ` + maxHistoryLit +
		` THEN json_remove(history, '$[0]') ELSE history END, '$[#]', json_object('t', ?, 'by', ?, 'do', ?))`

	// The heads of the changes of many jobs under their leases, their
	// parameters numbered: a start mark (now, now), an ack that deletes
	// (none), one that keeps the job as done (now, now), an extension
	// (expiry, now).
	sqliteStartHead  = "UPDATE {jobs} SET attempts = attempts + 1, updated_at = MAX(updated_at + 1, ?1), started_at = ?2"
	sqliteAckHead    = "DELETE FROM {jobs}"
	sqliteDoneHead   = "UPDATE {jobs} SET state = 'done', finished_at = ?1, updated_at = ?2"
	sqliteExtendHead = "UPDATE {jobs} SET lease_expires_at = ?1, updated_at = MAX(updated_at + 1, ?2)"

	// sqliteRetryDead makes dead letters pending again, available now
	// (now, now, now), attempts reset; sqliteCancel cancels jobs (now, now,
	// the error recorded).
	sqliteRetryDead = "UPDATE {jobs} SET state = 'pending', attempts = 0, available_at = ?, run_at = ?, updated_at = ?, finished_at = 0, lease_token = NULL, lease_expires_at = 0"
	sqliteCancel    = "UPDATE {jobs} SET state = 'cancelled', finished_at = ?, updated_at = ?, last_error = ?"
)

// sqliteByToken is the by-token statement of a change of many jobs under
// their leases: head (with n numbered parameters), then the tokens as a
// JSON array (jsonTokens) and now. CROSS JOIN keeps the tokens the outer
// loop, so every token is one rowid lookup (the seq its token ends in);
// state and the expiry are tested on the row found (unary +: no index is
// to serve them). It returns the (id, lease_token) of the rows it changed
// or deleted, whose IDs the caller must check.
func sqliteByToken(head string, n int) string {
	toks, at := "?"+strconv.Itoa(n+1), "?"+strconv.Itoa(n+2)
	return head + " WHERE seq IN (SELECT k.seq FROM json_each(" + toks + ") l CROSS JOIN {jobs} k" +
		" ON k.seq = CAST(substr(l.value, instr(l.value, '-') + 1) AS INTEGER)" +
		" WHERE k.lease_token = l.value AND +k.state = 'pending' AND +k.lease_expires_at > " + at + ") RETURNING id, lease_token"
}

// sqliteByPair is the statement of a change of many jobs under their
// leases that matches each (id, token) pair in SQL: head (with n
// numbered parameters), then the IDs and the tokens as two text-array
// literals (see pgArray), turned into JSON arrays, and now. Each token
// ends in its row's seq, so every lease is one rowid lookup.
func sqliteByPair(head string, n int) string {
	ids, toks, at := "?"+strconv.Itoa(n+1), "?"+strconv.Itoa(n+2), "?"+strconv.Itoa(n+3)
	js := func(p string) string { return "'[' || substr(" + p + ", 2, length(" + p + ") - 2) || ']'" }
	return "WITH a(k, id) AS MATERIALIZED (SELECT key, value FROM json_each(" + js(ids) + ")) " +
		head + " WHERE seq IN (SELECT CAST(substr(value, instr(value, '-') + 1) AS INTEGER) FROM json_each(" + js(toks) + "))" +
		" AND (id, lease_token) IN (SELECT a.id, b.value FROM json_each(" + js(toks) + ") b JOIN a ON a.k = b.key)" +
		" AND +state = 'pending' AND +lease_expires_at > " + at + " RETURNING id, lease_token"
}
