package sqlqueue

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	queue "github.com/meridianjobs/meridian/queue/driver"
	"github.com/meridianjobs/meridian/sqlqueue/internal/migrate"
)

// Dialect names the SQL flavour a Queue speaks. New detects it from the
// database/sql driver; WithDialect sets it when detection cannot tell (a
// wrapped or unusual driver).
type Dialect string

// The supported dialects.
const (
	Postgres Dialect = "postgres" // PostgreSQL 12+ (pgx stdlib, lib/pq)
	MySQL    Dialect = "mysql"    // MySQL 8.0.1+ and MariaDB 10.6+ (go-sql-driver/mysql)
	SQLite   Dialect = "sqlite"   // SQLite 3.35+ (modernc.org/sqlite, mattn/go-sqlite3)
)

// dialect is the seam between the portable Queue and one SQL flavour. Each
// dialect implements it once, in its own files (dialect_<name>*.go): the
// text of every named statement (queries: see query) and the operations
// whose strategy differs (a claim in one statement or in a transaction,
// how a batch of leases is passed, how an insert learns what it stored).
// The portable code validates, chunks, wraps errors and keeps the
// in-process state (wake-ups, metrics buffer); it runs statements by name
// and builds no SQL text, and never tests which dialect it holds.
//
// Operations get the Queue for its handle (q.db) and its rendered
// statements (q.stmt, q.stmtN, q.stmtIn); they return unwrapped errors.
type dialect interface {
	// name reports the dialect.
	name() Dialect
	// quote quotes an identifier that has already been validated.
	quote(ident string) string
	// rebind turns the ? placeholders of a statement built by this package
	// into the dialect's own.
	rebind(query string) string
	// maxParams is the most bind parameters one statement may carry.
	maxParams() int
	// pushLanes is how many single pushes of a Queue run on their own at
	// once before the others wait to go together (pushgroup.go).
	pushLanes() int

	// searchIndexer is the dialect's opt-in payload search index.
	searchIndexer
	// listFlavor is what the dialect's lists, searches and bulk
	// selections need of it (dialect_lists.go).
	listFlavor

	// configure adjusts a handle at New (SQLite: one connection).
	configure(db DB)
	// prepare readies the database at a Queue's first use, before the
	// schema version is checked (SQLite: the busy timeout).
	prepare(ctx context.Context, q *Queue) error
	// prepared runs once the schema version is known to be right (MySQL:
	// learn the affected-rows mode; SQLite: switch the file to WAL).
	prepared(ctx context.Context, q *Queue) error
	// writeTx runs fn in one short write transaction.
	writeTx(ctx context.Context, q *Queue, fn func(ex execer) error) error
	// pushBatch runs fn, the push of n jobs in chunks insertions
	// outside the caller's transaction, on the pool or in a write
	// transaction of its own (inTx). A push of several jobs is always
	// one transaction, so that it is stored whole or not at all, the
	// revival of a finished job's ID included.
	pushBatch(ctx context.Context, q *Queue, n, chunks int, fn func(ex statements, inTx bool) error) error

	// queries are the dialect's texts of the named statements (see
	// query), rendered once per Queue at New.
	queries() []queryTemplates
	// migrations are the dialect's schema migrations (the tables' DDL,
	// in sqlqueue/internal/migrate/sql/<dialect>) and how they run.
	migrations() *migrate.Dialect

	// reserve leases up to max ready jobs of queues (not paused) until
	// expires, each with its own token made from token, in claim order,
	// adding inc to their attempts (see claimCount).
	reserve(ctx context.Context, q *Queue, queues []string, max int, now, expires time.Time, token string, inc claimCount) ([]row, error)
	// insertJobs inserts js in one statement on ex (held: jobs that name
	// UniqueStates, by qInsertJobsHeld), skipping rows whose ID
	// or unique key is taken, and returns the IDs it inserted. With
	// notify the same statement wakes listeners when it inserted anything
	// (notified).
	insertJobs(ctx context.Context, q *Queue, ex statements, js []queue.Job, now time.Time, notify, held bool) (inserted map[string]bool, notified bool, err error)
	// revive moves the finished or dead job j.ID back to pending as j,
	// behind the jobs pushed before it. It reports false when the row is
	// no longer finished or j's unique key is held. inTx: ex is the
	// caller's transaction.
	revive(ctx context.Context, q *Queue, ex statements, inTx bool, j queue.Job, keepCreated bool, now time.Time) (bool, error)
	// notifyTx wakes listeners of the stored jobs of js inside ex's
	// transaction; announce does so after a push outside one. Both do
	// nothing on dialects without notifications.
	notifyTx(ctx context.Context, q *Queue, ex statements, js []queue.Job, stored []bool) error
	announce(q *Queue, js []queue.Job, stored []bool)

	// finishLeases applies each of parts, in one statement or one
	// transaction: it makes the part's change (its leaseOp's statements,
	// leaseQueries, with the part's args before the leases) to the jobs
	// whose lease in the part's leases is current at now, and returns per
	// part the leases it changed. No lease is in two parts; two parts are
	// a start mark then an ack. On error none is known changed.
	finishLeases(ctx context.Context, q *Queue, parts []leaseStmt, now int64) ([]map[queue.Lease]bool, error)
	// isUniqueViolation reports whether err is a unique-constraint error.
	isUniqueViolation(err error) bool
	// isConfig reports whether err is one no retry can fix: a missing
	// table or database, bad credentials.
	isConfig(err error) bool
	// isConflict reports whether err says the server rolled the whole
	// transaction back to break a deadlock or a serialization conflict,
	// so that running it again from the start is safe.
	isConflict(err error) bool

	// inspectRead runs the reads of one inspection call (listing: a
	// ListJobs of done, dead or ready jobs) on one statements, bounded by
	// timeout when it is positive.
	inspectRead(ctx context.Context, q *Queue, timeout time.Duration, listing bool, fn func(st statements) error) error
	// priorities lists up to maxPriorities+1 distinct priorities of each
	// named queue's pending jobs, highest first (none for a queue without
	// pending jobs).
	priorities(ctx context.Context, q *Queue, st statements, names []string) (map[string][]int64, error)

	// dropFunctions returns the statements that drop what the migrations
	// created outside the tables (vars: migrationVars), if any: the
	// counting triggers' functions and the leases function (PostgreSQL).
	dropFunctions(vars map[string]string) []string
	// foldCounts moves the counts of the shards no open transaction holds
	// into shard 0 (see the counts migration); the maintenance pass runs it.
	foldCounts(ctx context.Context, q *Queue) error
	// vacuumIfDue vacuums the jobs table when it holds enough dead rows to
	// be worth it (bar's dead rows or more), on dialects that need it.
	vacuumIfDue(ctx context.Context, q *Queue, bar vacuumBar) error
}

func dialectFor(name Dialect) (dialect, error) {
	switch name {
	case Postgres:
		return pgDialect{}, nil
	case MySQL:
		return mysqlDialect{}, nil
	case SQLite:
		return sqliteDialect{}, nil
	}
	return nil, fmt.Errorf("sqlqueue: unknown dialect %q (known: postgres, mysql, sqlite)", name)
}

// detectDialect names the dialect of a database/sql driver from its type's
// package path, so the core imports no driver.
func detectDialect(drv any) (Dialect, error) {
	t := reflect.TypeOf(drv)
	if t == nil {
		return "", errors.New("sqlqueue: the database has no driver; pass WithDialect")
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	path := strings.ToLower(t.PkgPath() + "." + t.Name())
	switch {
	case strings.Contains(path, "pgx"), strings.Contains(path, "lib/pq"), strings.Contains(path, "postgres"):
		return Postgres, nil
	case strings.Contains(path, "mysql"), strings.Contains(path, "mariadb"):
		return MySQL, nil
	case strings.Contains(path, "sqlite"):
		return SQLite, nil
	}
	return "", fmt.Errorf("sqlqueue: cannot tell the SQL dialect of driver %s; pass WithDialect", t.String())
}

// placeholders returns "?, ?, ?" with n marks.
func placeholders(n int) string {
	if n <= 0 {
		return ""
	}
	return strings.Repeat("?, ", n-1) + "?"
}

func quoteDouble(s string) string { return `"` + s + `"` }

// noNotify is the notification half of a dialect that has none.
type noNotify struct{}

func (noNotify) notifyTx(context.Context, *Queue, statements, []queue.Job, []bool) error { return nil }
func (noNotify) announce(*Queue, []queue.Job, []bool)                                    {}

// noFunctions is dropFunctions of a dialect whose migrations create no
// function of their own.
type noFunctions struct{}

func (noFunctions) dropFunctions(map[string]string) []string { return nil }

// noVacuum is the maintenance half of a dialect that needs no vacuum.
type noVacuum struct{}

func (noVacuum) vacuumIfDue(context.Context, *Queue, vacuumBar) error { return nil }

// poolPush is pushBatch on the pool for one job, and in a write
// transaction for several. One insertion would commit a batch whole on
// its own, but a batch that also revives IDs of finished jobs writes again
// after it (a revival can wait on a locked row until the caller gives
// up), so only a push of one job, which stores by exactly one of the two
// statements, runs without a transaction.
type poolPush struct{}

func (poolPush) pushBatch(ctx context.Context, q *Queue, n, chunks int, fn func(ex statements, inTx bool) error) error {
	if n < 2 && chunks < 2 {
		return fn(q.reads(), false)
	}
	return q.d.writeTx(ctx, q, func(ex execer) error { return fn(stmts(ex), true) })
}
