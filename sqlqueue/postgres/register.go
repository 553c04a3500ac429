package postgres

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/sqlqueue"
	"github.com/meridianjobs/meridian/sqlqueue/internal/hook"
)

func init() {
	queue.Register("postgres", open)
	queue.Register("postgresql", open)
}

// defaultMaxConns is the pool size Open uses when the DSN does not set
// pool_max_conns (pgxpool's own default, four on small machines, is
// tight for a Worker's reservers, ackers and heartbeats beside the
// program's own queries).
const defaultMaxConns = 16

// Open connects to the PostgreSQL database dsn (a URL or key=value
// connection string, as pgxpool accepts, including pool_max_conns), runs
// Setup and returns the queue with opts and every extra (LISTEN/NOTIFY
// wake-up, Health, Tx, COPY). The queue owns its pool: Close releases it.
// queue.Open with a postgres:// or postgresql:// URL returns the same
// *Queue.
func Open(ctx context.Context, dsn string, opts ...sqlqueue.Option) (*Queue, error) {
	return openDSN(ctx, dsn, true, opts)
}

func openDSN(ctx context.Context, dsn string, setup bool, opts []sqlqueue.Option) (*Queue, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("sqlqueue/postgres: parsing the connection string: %w", err)
	}
	if !strings.Contains(dsn, "pool_max_conns") {
		cfg.MaxConns = max(cfg.MaxConns, defaultMaxConns)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("sqlqueue/postgres: opening the pool: %w", err)
	}
	return hook.OpenOwned(ctx, setup, func() error { pool.Close(); return nil },
		func() (*Queue, error) { return New(ctx, pool, opts...) },
		func(q *Queue) { q.ownsPool = true })
}

// open is the queue.Opener: sqlqueue's parameters are removed from the URL
// and the rest is pgx's.
func open(ctx context.Context, u *url.URL) (queue.Queue, error) {
	params := u.Query()
	table, setup, err := hook.URLParams(params, func(string) bool { return true })
	if err != nil {
		return nil, err
	}
	var opts []sqlqueue.Option
	if table != "" {
		opts = append(opts, sqlqueue.WithTable(table))
	}
	params.Del("table")
	params.Del("setup")
	dsn := *u
	dsn.RawQuery = params.Encode()
	return openDSN(ctx, dsn.String(), setup, opts)
}
