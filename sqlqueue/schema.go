package sqlqueue

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/meridianjobs/meridian/queue"
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

func names(d dialect, table string) tableNames {
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
	// SET fragment that clears it with the lease token; {xcol} adds it to
	// jobCols.
	expiry, unlease, xcol := d.leaseColumns()
	t.replacer = strings.NewReplacer(
		"{jobs}", t.jobs, "{pauses}", t.pauses, "{workers}", t.workers,
		"{metrics}", t.metrics, "{meta}", t.meta, "{expiry}", expiry, "{unlease}", unlease,
		"{xcol}", xcol,
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
func metaRows(d dialect, t tableNames) []string {
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
		if err := q.d.lockSetup(ctx, ex, q.t.raw); err != nil {
			return err
		}
		for _, s := range stmts {
			if _, err := ex.ExecContext(ctx, s); err != nil {
				return fmt.Errorf("%w (statement: %.80s...)", err, s)
			}
		}
		return nil
	})
	if err != nil {
		return q.wrap(ctx, err, "setting up tables %s", q.t.raw)
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
	if err := q.d.prepare(ctx, q); err != nil {
		return q.wrap(ctx, err, "preparing the %s connection", q.d.name())
	}
	if err := q.checkVersion(ctx, stmts(q.db)); err != nil {
		return err
	}
	if err := q.d.prepared(ctx, q); err != nil {
		return q.wrap(ctx, err, "preparing the %s connection", q.d.name())
	}
	q.ready = true
	return nil
}

// useTx is use for a caller's transaction: it checks the schema version
// through tx (on SQLite the pool's only connection may be the one tx
// holds) without preparing the connection.
func (q *Queue) useTx(ctx context.Context, tx statements) error {
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
func (q *Queue) checkVersion(ctx context.Context, ex statements) error {
	var v string
	err := queryRow(ctx, ex, q.sql("SELECT value FROM {meta} WHERE name = 'schema_version'"), nil, &v)
	if err != nil && ctx.Err() == nil {
		var n int
		if qerr := queryRow(ctx, ex, q.d.tableExists(), []any{q.t.raw + "_meta"}, &n); qerr == nil && n == 0 {
			return fmt.Errorf("sqlqueue: table %s_meta does not exist: run Setup, or apply sqlqueue.Schema(%q) in a migration: %w", q.t.raw, q.d.name(), queue.ErrConfig)
		}
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("sqlqueue: table %s_meta records no schema version: run Setup, or apply sqlqueue.Schema(%q) in a migration: %w", q.t.raw, q.d.name(), queue.ErrConfig)
		}
	}
	if err != nil {
		return q.wrap(ctx, err, "checking schema version of %s", q.t.raw)
	}
	if v != strconv.Itoa(SchemaVersion) {
		n, _ := strconv.Atoi(v)
		if n > SchemaVersion {
			return fmt.Errorf("sqlqueue: tables %s have schema version %s, newer than this build of meridian knows (%d): upgrade github.com/meridianjobs/meridian: %w", q.t.raw, v, SchemaVersion, queue.ErrConfig)
		}
		return fmt.Errorf("sqlqueue: tables %s have schema version %s but this build needs %d: migrate them (apply the difference to sqlqueue.Schema(%q)) or drop them and run Setup: %w", q.t.raw, v, SchemaVersion, q.d.name(), queue.ErrConfig)
	}
	return nil
}

// writeTx runs fn in one short write transaction of the dialect's kind
// (see dialect.writeTx).
func (q *Queue) writeTx(ctx context.Context, fn func(ex execer) error) error {
	return q.d.writeTx(ctx, q, fn)
}

// dbTx runs fn in a database/sql transaction with opts.
func dbTx(ctx context.Context, db DB, opts *sql.TxOptions, fn func(ex execer) error) error {
	tx, err := db.BeginTx(ctx, opts)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
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
			return q.wrap(ctx, err, "dropping table %s", table)
		}
	}
	return nil
}
