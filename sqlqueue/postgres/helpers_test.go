package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/meridianjobs/meridian/internal/testutil"
	"github.com/meridianjobs/meridian/sqlqueue"
	"github.com/meridianjobs/meridian/sqlqueue/postgres"
)

// testDSN returns MERIDIAN_POSTGRES_DSN after checking the server answers.
// Unset or unreachable skips the test, or fails it under CI=true.
func testDSN(t testing.TB) string {
	t.Helper()
	dsn := testutil.DSN(t, testutil.PostgresEnv)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	pool, err := pgxpool.New(ctx, dsn)
	if err == nil {
		err = pool.Ping(ctx)
		pool.Close()
	}
	if err != nil {
		testutil.Unreachable(t, testutil.PostgresEnv, err)
	}
	return dsn
}

// randomTable returns a table name no other test uses.
func randomTable() string { return testutil.Name("mpg_") }

// newPool opens a small pool on dsn, closed when the test ends.
func newPool(t testing.TB, dsn string) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatalf("parsing MERIDIAN_POSTGRES_DSN: %v", err)
	}
	cfg.MaxConns = 6
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatalf("opening a pool: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// openQueue returns a Queue on its own pool over table, closed (before its
// pool) when the test ends. It runs no Setup.
func openQueue(t testing.TB, dsn, table string, opts ...sqlqueue.Option) *postgres.Queue {
	t.Helper()
	pool := newPool(t, dsn)
	q, err := postgres.NewWithConfig(t.Context(), pool, postgres.Config{}, append(opts, sqlqueue.WithTable(table))...)
	if err != nil {
		t.Fatalf("postgres.New: %v", err)
	}
	t.Cleanup(func() {
		if err := q.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return q
}

// newQueue returns a Queue on a fresh table that is set up now and dropped
// when the test ends.
func newQueue(t testing.TB, dsn string, opts ...sqlqueue.Option) *postgres.Queue {
	t.Helper()
	q := openQueue(t, dsn, randomTable(), opts...)
	if err := q.Setup(t.Context()); err != nil {
		t.Fatalf("Setup: %v", err)
	}
	t.Cleanup(func() {
		if err := q.DropTables(context.Background()); err != nil {
			t.Errorf("DropTables: %v", err)
		}
	})
	return q
}
