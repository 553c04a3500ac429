package sqlqueue_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite"

	"github.com/meridianjobs/meridian/internal/testutil"
	"github.com/meridianjobs/meridian/sqlqueue"
)

// backend opens databases of one dialect for tests.
type backend struct {
	dialect sqlqueue.Dialect
	// open returns a new *sql.DB on the test database; for SQLite, on the
	// file path.
	open func(t testing.TB, path string) *sql.DB
}

func serverBackend(t testing.TB, d sqlqueue.Dialect, driverName, env string) backend {
	t.Helper()
	source := testutil.DSN(t, env)
	b := backend{dialect: d, open: func(t testing.TB, _ string) *sql.DB {
		t.Helper()
		db, err := sql.Open(driverName, source)
		if err != nil {
			t.Fatalf("opening %s: %v", d, err)
		}
		db.SetMaxOpenConns(8)
		t.Cleanup(func() { db.Close() })
		return db
	}}
	// Fail (or skip) once, clearly, when the server is down.
	db := b.open(t, "")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s server unreachable (%s): %v", d, env, err)
		}
		t.Skipf("%s server unreachable (%s): %v", d, env, err)
	}
	return b
}

func backends(t *testing.T) map[sqlqueue.Dialect]func(t *testing.T) backend {
	return map[sqlqueue.Dialect]func(t *testing.T) backend{
		sqlqueue.SQLite: func(t *testing.T) backend { return sqliteBackend() },
		sqlqueue.Postgres: func(t *testing.T) backend {
			return serverBackend(t, sqlqueue.Postgres, "pgx", "MERIDIAN_POSTGRES_DSN")
		},
		sqlqueue.MySQL: func(t *testing.T) backend {
			return serverBackend(t, sqlqueue.MySQL, "mysql", "MERIDIAN_MYSQL_DSN")
		},
	}
}

func sqliteBackend() backend {
	return backend{dialect: sqlqueue.SQLite, open: func(t testing.TB, path string) *sql.DB {
		t.Helper()
		db, err := sql.Open("sqlite", path)
		if err != nil {
			t.Fatalf("opening %s: %v", path, err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}}
}

// store is one isolated queue store: a random table (and, for SQLite, a
// file of its own) that is dropped when the test ends.
type store struct {
	b     backend
	table string
	path  string
}

// tableSuffixes name a queue's tables after its jobs table's name: every
// table the migrations make, so a test drops them all.
// The payload search index's tables (MariaDB) are dropped too.
var tableSuffixes = append(sqlqueue.TableSuffixes(), "_search", "_search_gone")

func newStore(t testing.TB, b backend) store {
	t.Helper()
	var r [6]byte
	_, _ = rand.Read(r[:])
	s := store{b: b, table: "mt_" + hex.EncodeToString(r[:])}
	if b.dialect == sqlqueue.SQLite {
		s.path = filepath.Join(t.TempDir(), "q.db")
	}
	return s
}

// queue opens a new handle on the store, as a process would, running Setup
// (idempotent) and dropping the tables at cleanup.
func (s store) queue(t testing.TB, opts ...sqlqueue.Option) *sqlqueue.Queue {
	t.Helper()
	q, _ := s.open(t, opts...)
	return q
}

// backdate moves every finished job's and batch's finish d into the past,
// as if d had passed since: retention tests age rows instead of waiting.
func (s store) backdate(t testing.TB, db *sql.DB, d time.Duration) {
	t.Helper()
	for _, table := range []string{s.table, s.table + "_batches"} {
		stmt := fmt.Sprintf("UPDATE %s SET finished_at = finished_at - %d WHERE finished_at > 0", table, d.Microseconds())
		if _, err := db.ExecContext(t.Context(), stmt); err != nil {
			t.Fatalf("backdating %s: %v", table, err)
		}
	}
}

// open is queue that also returns the database handle.
func (s store) open(t testing.TB, opts ...sqlqueue.Option) (*sqlqueue.Queue, *sql.DB) {
	t.Helper()
	db := s.b.open(t, s.path)
	q, err := sqlqueue.New(db, append([]sqlqueue.Option{sqlqueue.WithTable(s.table)}, opts...)...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if err := q.Setup(t.Context()); err != nil {
		t.Fatalf("Setup: %v", err)
	}
	if s.b.dialect != sqlqueue.SQLite {
		t.Cleanup(func() {
			for _, suffix := range tableSuffixes {
				_, _ = db.ExecContext(context.Background(), "DROP TABLE IF EXISTS "+s.table+suffix)
			}
			if s.b.dialect == sqlqueue.Postgres {
				_, _ = db.ExecContext(context.Background(), "DROP FUNCTION IF EXISTS "+s.table+"_count_ins_fn(), "+s.table+"_count_del_fn(), "+s.table+"_count_upd_fn(), "+s.table+"_sched_ins_fn(), "+s.table+"_sched_del_fn(), "+s.table+"_sched_upd_fn(), "+s.table+"_leases_fn(TEXT[], TEXT[])")
			}
		})
	}
	return q, db
}
