package sqlqueue

import (
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"

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

// dialect is the seam between the portable implementation and one SQL
// flavour. Each dialect file defines one value; the portable code asks it for
// the pieces of SQL that differ and for the strategy of the operations that
// cannot be one portable statement.
type dialect struct {
	name Dialect
	// quote quotes an identifier that has already been validated.
	quote func(string) string
	// dollar: placeholders are $1, $2 ... instead of ?.
	dollar bool
	// maxParams is the most bind parameters one statement may carry.
	maxParams int
	// migrations are the dialect's schema migrations (the tables' DDL)
	// and how they run.
	migrations *migrate.Dialect
	// isUniqueViolation reports whether err is a unique-constraint error.
	isUniqueViolation func(error) bool
	// returning: INSERT/UPDATE/DELETE ... RETURNING is available, so a push
	// learns which rows it stored and a batch ack which rows it finished in
	// the statement itself. Without it (MySQL/MariaDB) a batch push learns
	// them from the affected-row count and the first AUTO_INCREMENT value
	// (one lookup when some rows were skipped), and a batch ack from the
	// affected-row count (locking the rows first when some lease was lost).
	returning bool
	// oneStatementReserve: Reserve is one UPDATE ... WHERE id IN (SELECT ...
	// FOR UPDATE SKIP LOCKED) RETURNING statement (PostgreSQL). Otherwise it
	// is a select then an update by primary key in one short write
	// transaction.
	oneStatementReserve bool
	// leaseCol names the column that holds a running job's lease expiry,
	// apart from run_at, so that a claim changes no indexed column: on
	// PostgreSQL the claim is then a HOT update (no index entry written,
	// with room on the page: see the table's fillfactor). A row is
	// claimable when run_at <= now and leaseCol <= now; leaseCol is 0 when
	// the row holds no lease. Empty: run_at itself holds the expiry while
	// the job runs (SQLite, MySQL: InnoDB has no HOT updates, and there
	// the gain, 1.02-1.17x, did not pay for running jobs leaving the
	// index).
	leaseCol string
	// leaseToken returns the expression that gives each reserved job its
	// own token: the reservation's random token (a bind parameter) joined
	// to the row's seq column.
	leaseToken func(seq string) string
	// skipLocked is appended to the claim SELECT of the two-step reserve.
	skipLocked string
	// pausesInClaim: the two-step reserve's claim SELECT leaves paused
	// queues out itself, through a subquery on the pauses table, instead
	// of reading the pauses first (one round trip fewer). Only where the
	// claim's locking read does not lock the subquery's rows (MySQL and
	// MariaDB lock the outer table's rows only).
	pausesInClaim bool
	// immediate: write transactions are BEGIN IMMEDIATE on one connection
	// (SQLite), not database/sql transactions.
	immediate bool
	// readCommitted: write transactions run under READ COMMITTED.
	readCommitted bool
	// insertIgnore is the suffix of a multi-row INSERT that skips rows whose
	// ID or unique key is taken.
	insertIgnore string
	// reviveGuard: the UPDATE that revives a dead letter checks the unique
	// key in a subquery so it cannot fail (PostgreSQL: an error would abort
	// the caller's transaction). MySQL cannot name the target table in a
	// subquery and does not abort on the error, so it relies on the index.
	reviveGuard bool
	// reviveSeq is the expression that gives a revived dead letter a new
	// insertion position (seq), so it queues behind jobs pushed before it.
	// Empty (MySQL, whose AUTO_INCREMENT only counts on INSERT) revives by
	// deleting and re-inserting the row inside a transaction or savepoint.
	reviveSeq string
	// greatest is the two-argument maximum function.
	greatest string
	// contains returns a condition true when the column col contains the
	// bind parameter (a substring, case-sensitive; bytes when blob).
	contains func(col string, blob bool) string
	// upsertIgnore is the INSERT prefix and suffix for "insert unless the
	// key exists".
	insertOrIgnore func(table, cols, values string) string
	// upsertMetrics is the upsert of one metrics row: it adds to the
	// counters and keeps the larger maximum.
	upsertMetrics func(table string) string
	// upsertWorker creates or refreshes one worker row.
	upsertWorker func(table string) string
	// ackMany returns the statement that finishes the n leases given as
	// (id, token) pairs; with returning it returns the (id, lease_token) of the rows it finished.
	// set is the SET clause (done) or "" (delete).
	ackMany func(table string, n int, set string) string
	// ackArrays: the ackMany statement takes two parameters, the IDs and
	// the tokens as text-array literals (pgArray), instead of n (id,
	// token) pairs, so one statement text serves every batch size.
	ackArrays bool
	// ackPairsFirst: the ackMany statement's (id, token) parameters come
	// before those of its SET clause (a WITH list ahead of the UPDATE).
	ackPairsFirst bool
	// stepLooseScan: loose index scans (the distinct queues or priorities
	// of the inspection queries) run as one indexed query per step from
	// Go. MariaDB does not use the index for the correlated step of a
	// recursive CTE and reads every row instead (0.8 s over 1,000,000
	// jobs, against 1 ms for the steps).
	stepLooseScan bool
	// vacuumDue is a query with one parameter (the quoted jobs table name)
	// returning one boolean: the jobs table holds enough dead rows to be
	// worth vacuuming. vacuum is that statement, on {jobs}. Empty: the
	// dialect needs neither (Maintain skips the step).
	vacuumDue, vacuum string
	// notify returns the statement that wakes listeners, or "".
	notify string
}

func dialectFor(name Dialect) (*dialect, error) {
	switch name {
	case Postgres:
		return postgresDialect, nil
	case MySQL:
		return mysqlDialect, nil
	case SQLite:
		return sqliteDialect, nil
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

// rebind turns ? placeholders into $1, $2 ... for dialects that need it.
// The SQL this package writes has no ? outside placeholders.
func (d *dialect) rebind(query string) string {
	if !d.dollar {
		return query
	}
	var b strings.Builder
	b.Grow(len(query) + 16)
	n := 0
	for i := 0; i < len(query); i++ {
		if query[i] == '?' {
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteByte(query[i])
	}
	return b.String()
}

// placeholders returns "?, ?, ?" with n marks.
func placeholders(n int) string {
	if n <= 0 {
		return ""
	}
	return strings.Repeat("?, ", n-1) + "?"
}

// tuples returns "(?, ?), (?, ?)" with n tuples of width w.
func tuples(n, w int) string {
	one := "(" + placeholders(w) + ")"
	var b strings.Builder
	b.Grow(n * (len(one) + 2))
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(one)
	}
	return b.String()
}

func quoteDouble(s string) string { return `"` + s + `"` }
