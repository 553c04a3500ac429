package postgres

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/meridianjobs/meridian/internal/urlquery"
	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/sqlqueue"
	"github.com/meridianjobs/meridian/sqlqueue/internal/hook"
)

func init() {
	queue.Register("postgres", open)
	queue.Register("postgresql", open)
}

// pgxParams are the URL parameters pgx and pgxpool read, and the server
// settings most set at connect; any other setting goes through
// options=-c name=value. Anything else in a postgres:// URL is refused
// rather than sent to the server as a setting.
var pgxParams = []string{
	"host", "port", "dbname", "user", "password", "passfile", "service", "servicefile", "connect_timeout",
	"sslmode", "sslkey", "sslcert", "sslrootcert", "sslpassword", "sslsni", "sslnegotiation", "channel_binding",
	"krbsrvname", "krbspn", "target_session_attrs", "min_read_buffer_size",
	"statement_cache_capacity", "description_cache_capacity", "default_query_exec_mode",
	"pool_max_conns", "pool_min_conns", "pool_min_idle_conns", "pool_max_conn_lifetime", "pool_max_conn_lifetime_jitter",
	"pool_max_conn_idle_time", "pool_health_check_period",
	"application_name", "search_path", "options", "timezone", "TimeZone", "client_encoding",
	"statement_timeout", "lock_timeout", "idle_in_transaction_session_timeout",
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
	if u, err := url.Parse(dsn); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		// pgx reads a URL's query with url.URL.Query, which drops what
		// it cannot parse; refuse it as queue.Open does.
		if _, err := urlquery.Values(u); err != nil {
			return nil, fmt.Errorf("sqlqueue/postgres: parsing the connection string: %w", err)
		}
	}
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
	params, err := urlquery.Values(u)
	if err != nil {
		return nil, fmt.Errorf("sqlqueue/postgres: %w", err)
	}
	opts, setup, err := sqlqueue.URLOptions(params)
	if err != nil {
		return nil, err
	}
	if err := sqlqueue.CheckDriverParams(params, "pgx", pgxParams); err != nil {
		return nil, err
	}
	dsn := *u
	dsn.RawQuery = params.Encode()
	return openDSN(ctx, dsn.String(), setup, opts)
}
