package sqlqueue

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// SchemaVersion is the version of the tables this package reads and writes.
// Setup records it in the <table>_meta table; a Queue refuses tables of
// another version at first use.
const SchemaVersion = 1

// tableNames holds the quoted names of one queue's tables and the replacer
// that puts them into query templates.
type tableNames struct {
	raw                                   string
	jobs, pauses, workers, metrics, meta  string
	claimIdx, uniqueIdx, stateIdx, finIdx string
	seqIdx                                string
	replacer                              *strings.Replacer
}

func names(d *dialect, table string) tableNames {
	t := tableNames{
		raw:       table,
		jobs:      d.quote(table),
		pauses:    d.quote(table + "_pauses"),
		workers:   d.quote(table + "_workers"),
		metrics:   d.quote(table + "_metrics"),
		meta:      d.quote(table + "_meta"),
		claimIdx:  d.quote(table + "_claim"),
		uniqueIdx: d.quote(table + "_unique"),
		stateIdx:  d.quote(table + "_state"),
		finIdx:    d.quote(table + "_finished"),
		seqIdx:    d.quote(table + "_seq"),
	}
	// {expiry} is the column holding the lease expiry; {unlease} is the
	// SET fragment that clears it with the lease token.
	// {xcol} and {xcolT} add it to jobCols and jobColsT.
	expiry, unlease, xcol, xcolT := "run_at", "", "", ""
	if d.leaseCol != "" {
		expiry, unlease, xcol, xcolT = d.leaseCol, ", "+d.leaseCol+" = 0", ", "+d.leaseCol, ", t."+d.leaseCol
	}
	t.replacer = strings.NewReplacer(
		"{jobs}", t.jobs, "{pauses}", t.pauses, "{workers}", t.workers,
		"{metrics}", t.metrics, "{meta}", t.meta, "{expiry}", expiry, "{unlease}", unlease,
		"{xcol}", xcol, "{xcolT}", xcolT,
	)
	return t
}

// Schema returns the DDL that creates a queue's tables and indexes in
// dialect d, for users who manage their schema with migrations. WithTable
// among opts names the tables; other options are ignored. The statements
// are idempotent and separated by ";\n\n"; run them one at a time where
// the driver does not accept several statements in one Exec. The last
// statements record the schema version, which the Queue checks at first
// use.
func Schema(d Dialect, opts ...Option) (string, error) {
	cfg := config{table: "meridian_jobs"}
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return "", err
		}
	}
	dl, err := dialectFor(d)
	if err != nil {
		return "", err
	}
	t := names(dl, cfg.table)
	return strings.Join(append(dl.ddl(t), metaRows(dl, t)...), ";\n\n") + ";\n", nil
}

// metaRows are the rows Setup inserts into <table>_meta.
func metaRows(d *dialect, t tableNames) []string {
	return []string{
		d.insertOrIgnore(t.meta, "name, value, expires_at", "'schema_version', '"+strconv.Itoa(SchemaVersion)+"', 0"),
		d.insertOrIgnore(t.meta, "name, value, expires_at", "'maintenance_leader', '', 0"),
	}
}

// Setup creates whatever of the queue's tables and indexes is missing and
// records the schema version. It is idempotent and safe to run from several
// processes at once. It refuses tables of another schema version.
func (q *Queue) Setup(ctx context.Context) error {
	stmts := append(q.d.ddl(q.t), metaRows(q.d, q.t)...)
	err := q.writeTx(ctx, func(ex execer) error {
		if q.d.name == Postgres {
			// Serialise concurrent Setups: CREATE ... IF NOT EXISTS races
			// in PostgreSQL's catalogs.
			if _, err := ex.ExecContext(ctx, "SELECT pg_advisory_xact_lock(hashtext($1))", "meridian:"+q.t.raw); err != nil {
				return err
			}
		}
		for _, s := range stmts {
			if _, err := ex.ExecContext(ctx, s); err != nil {
				return fmt.Errorf("%w (statement: %.80s...)", err, s)
			}
		}
		return nil
	})
	if err != nil {
		return wrap(ctx, err, "setting up tables %s", q.t.raw)
	}
	q.readyMu.Lock()
	q.ready = false
	q.readyMu.Unlock()
	return q.use(ctx)
}

// use checks, once per Queue, that the tables exist with this package's
// schema version, and prepares the connection (SQLite's WAL and busy
// timeout). Every method calls it first; after the first success it costs
// a mutex.
func (q *Queue) use(ctx context.Context) error {
	q.readyMu.Lock()
	defer q.readyMu.Unlock()
	if q.ready {
		return nil
	}
	if q.d.name == SQLite {
		// journal_mode is a property of the file, busy_timeout and
		// synchronous of the one connection New allowed; writeTx sets them
		// again for a connection the pool may have replaced. synchronous=
		// NORMAL is WAL's recommended setting: durable across process
		// crashes, one fsync per checkpoint instead of per commit.
		for _, p := range []string{"PRAGMA journal_mode=WAL", sqlitePragmas} {
			if _, err := q.db.ExecContext(ctx, p); err != nil {
				return wrap(ctx, err, "preparing SQLite connection (%s)", p)
			}
		}
	}
	if err := q.checkVersion(ctx, stmts(q.db)); err != nil {
		return err
	}
	if q.d.name == MySQL {
		// A no-op update changes no row: it affects one only when the
		// connection counts matched rows (clientFoundRows).
		res, err := q.db.ExecContext(ctx, q.sql("UPDATE {meta} SET value = value WHERE name = 'schema_version'"))
		if err != nil {
			return wrap(ctx, err, "checking the affected-rows mode")
		}
		n, err := res.RowsAffected()
		if err != nil {
			return wrap(ctx, err, "checking the affected-rows mode")
		}
		q.changedRows.Store(n == 0)
	}
	q.ready = true
	return nil
}

// useTx is use for a caller's transaction: it checks the schema version
// through tx (on SQLite the pool's only connection may be the one tx
// holds) without preparing the connection.
func (q *Queue) useTx(ctx context.Context, tx Statements) error {
	q.readyMu.Lock()
	ready := q.ready
	q.readyMu.Unlock()
	if ready {
		return nil
	}
	return q.checkVersion(ctx, tx)
}

// checkVersion refuses missing tables and tables of another version with
// an error that says what to run.
func (q *Queue) checkVersion(ctx context.Context, ex Statements) error {
	var v string
	err := queryRow(ctx, ex, q.sql("SELECT value FROM {meta} WHERE name = 'schema_version'"), nil, &v)
	if err != nil && ctx.Err() == nil {
		var n int
		if qerr := queryRow(ctx, ex, q.d.tableExists, []any{q.t.raw + "_meta"}, &n); qerr == nil && n == 0 {
			return fmt.Errorf("sqlqueue: table %s_meta does not exist: run Setup, or apply sqlqueue.Schema(%q) in a migration", q.t.raw, q.d.name)
		}
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("sqlqueue: table %s_meta records no schema version: run Setup, or apply sqlqueue.Schema(%q) in a migration", q.t.raw, q.d.name)
		}
	}
	if err != nil {
		return wrap(ctx, err, "checking schema version of %s", q.t.raw)
	}
	if v != strconv.Itoa(SchemaVersion) {
		n, _ := strconv.Atoi(v)
		if n > SchemaVersion {
			return fmt.Errorf("sqlqueue: tables %s have schema version %s, newer than this build of meridian knows (%d): upgrade github.com/meridianjobs/meridian", q.t.raw, v, SchemaVersion)
		}
		return fmt.Errorf("sqlqueue: tables %s have schema version %s but this build needs %d: migrate them (apply the difference to sqlqueue.Schema(%q)) or drop them and run Setup", q.t.raw, v, SchemaVersion, q.d.name)
	}
	return nil
}

// sqlitePragmas are the per-connection settings of SQLite.
const sqlitePragmas = "PRAGMA busy_timeout=30000; PRAGMA synchronous=NORMAL"

// writeTx runs fn in a short write transaction: BEGIN IMMEDIATE on one
// connection for SQLite (so the write lock is taken up front and a busy
// writer is waited for, not failed), a READ COMMITTED transaction for
// MySQL, a default transaction for PostgreSQL.
func (q *Queue) writeTx(ctx context.Context, fn func(ex execer) error) error {
	if q.d.immediate {
		return q.immediateTx(ctx, fn)
	}
	var opts *sql.TxOptions
	if q.d.readCommitted {
		opts = &sql.TxOptions{Isolation: sql.LevelReadCommitted}
	}
	tx, err := q.db.BeginTx(ctx, opts)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

func (q *Queue) immediateTx(ctx context.Context, fn func(ex execer) error) (err error) {
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

// DropTables drops the queue's tables and everything in them: for tests
// and teardown. The Queue must not be used afterwards unless Setup runs
// again.
func (q *Queue) DropTables(ctx context.Context) error {
	q.readyMu.Lock()
	q.ready = false
	q.readyMu.Unlock()
	for _, table := range []string{q.t.jobs, q.t.pauses, q.t.workers, q.t.metrics, q.t.meta} {
		if _, err := q.db.ExecContext(ctx, "DROP TABLE IF EXISTS "+table); err != nil {
			return wrap(ctx, err, "dropping table %s", table)
		}
	}
	return nil
}
