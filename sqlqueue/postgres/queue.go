package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	queue "github.com/meridianjobs/meridian/queue/driver"
	"github.com/meridianjobs/meridian/sqlqueue"
	"github.com/meridianjobs/meridian/sqlqueue/internal/hook"
)

// DefaultDebounce is the wake-up window of Config.Debounce. A shorter
// window starts single pushes sooner at a steady rate; below this one the
// latency did not improve (docs/benchmarks.md has the measurement).
const DefaultDebounce = 3 * time.Millisecond

// DefaultListenCheck is Config.ListenCheck's default: a LISTEN connection
// that passes no bytes is reported by Health within about 10 s.
const DefaultListenCheck = 5 * time.Second

// Config holds the PostgreSQL extras' own settings for NewWithConfig. The
// zero value is the default New uses.
type Config struct {
	// ListenDSN, when set, is the connection string the LISTEN connection
	// is opened from instead of the pool: for a pool behind a
	// transaction-mode pooler such as PgBouncer, where LISTEN does not
	// work. It must reach the same database.
	ListenDSN string
	// Debounce is the wake-up window: the first notification after a quiet
	// window wakes waiters at once, the rest of a burst wakes them once at
	// the window's end. Zero means DefaultDebounce.
	Debounce time.Duration
	// ListenCheck is how the listener finds a LISTEN connection that looks
	// open but passes no bytes (a stuck proxy or NAT, a half-dead network
	// path): after ListenCheck without a notification it sends itself one
	// on a channel of its own, and if that does not come back within
	// ListenCheck more, Health reports the connection unresponsive and
	// the listener dials again. So such a connection is reported within
	// 2 x ListenCheck. TCP keepalive also runs on the connection. Zero
	// means DefaultListenCheck.
	ListenCheck time.Duration
	// Logger receives the listener's connection losses and reconnects.
	// Nil means the logger of sqlqueue.WithLogger among the options (which
	// discards by default).
	Logger *slog.Logger
}

// Queue is sqlqueue's PostgreSQL queue with the extras: it embeds
// *sqlqueue.Queue, so it is a queue.Queue with every optional ability
// sqlqueue has (BatchPusher, BatchAcker, Inspector, Pauser,
// WorkerRegistry, RunObserver), and adds queue.Waiter through
// LISTEN/NOTIFY, Health, transactional enqueue in a pgx.Tx (Tx) and
// PushMany through COPY.
//
// A Queue is safe for concurrent use by many goroutines, and many
// processes may share one database (see sqlqueue.Queue). Close it when
// done: it holds one connection for LISTEN.
type Queue struct {
	*sqlqueue.Queue

	pool     *pgxpool.Pool
	db       *sql.DB
	l        *listener
	ownsPool bool
	jobs     string // quoted jobs table
	pauses   string // quoted pauses table

	closeOnce sync.Once
	closeErr  error
}

var (
	_ queue.Queue      = (*Queue)(nil)
	_ queue.Waiter     = (*Queue)(nil)
	_ queue.Inspector  = (*Queue)(nil)
	_ queue.Controller = (*Queue)(nil)
	_ queue.Workflows  = (*Queue)(nil)
	_ queue.Scheduler  = (*Queue)(nil)
	_ queue.Reporter   = (*Queue)(nil)
)

// New returns the PostgreSQL queue over pool with sqlqueue's opts (the
// dialect is PostgreSQL whatever opts say). It takes one connection out of
// pool for good (pgxpool's Hijack) and LISTENs on it, failing if it
// cannot; the pool may open another in its place. Like sqlqueue.New it
// creates no tables: run Setup (or apply sqlqueue.Schema in a migration)
// before first use.
//
// Close releases the listener; the pool stays the caller's.
func New(ctx context.Context, pool *pgxpool.Pool, opts ...sqlqueue.Option) (*Queue, error) {
	return NewWithConfig(ctx, pool, Config{}, opts...)
}

// NewWithConfig is New with the extras' settings in cfg.
func NewWithConfig(ctx context.Context, pool *pgxpool.Pool, cfg Config, opts ...sqlqueue.Option) (*Queue, error) {
	if pool == nil {
		return nil, errors.New("sqlqueue/postgres: New needs a pool")
	}
	if cfg.Debounce < 0 {
		return nil, fmt.Errorf("sqlqueue/postgres: debounce must not be negative, not %v", cfg.Debounce)
	}
	if cfg.Debounce == 0 {
		cfg.Debounce = DefaultDebounce
	}
	if cfg.ListenCheck < 0 {
		return nil, fmt.Errorf("sqlqueue/postgres: listen check must not be negative, not %v", cfg.ListenCheck)
	}
	if cfg.ListenCheck == 0 {
		cfg.ListenCheck = DefaultListenCheck
	}
	db := stdlib.OpenDBFromPool(pool)
	sq, err := sqlqueue.New(db, append(slices.Clone(opts), sqlqueue.WithDialect(sqlqueue.Postgres))...)
	if err != nil {
		db.Close()
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = hook.Of(sq).Logger()
	}
	hook.Of(sq).Direct(poolStatements{pool})
	q := &Queue{
		Queue:  sq,
		pool:   pool,
		db:     db,
		jobs:   pgx.Identifier{sq.Table()}.Sanitize(),
		pauses: pgx.Identifier{sq.Table() + "_pauses"}.Sanitize(),
	}
	dial := func(ctx context.Context) (*pgx.Conn, error) {
		c, err := pool.Acquire(ctx)
		if err != nil {
			return nil, err
		}
		return c.Hijack(), nil
	}
	if cfg.ListenDSN != "" {
		if _, err := pgx.ParseConfig(cfg.ListenDSN); err != nil {
			db.Close()
			return nil, fmt.Errorf("sqlqueue/postgres: parsing the listen DSN: %w", err)
		}
		dial = func(ctx context.Context) (*pgx.Conn, error) { return pgx.Connect(ctx, cfg.ListenDSN) }
	}
	q.l = newListener(sq.NotifyChannel(), dial, cfg.Debounce, cfg.ListenCheck, cfg.Logger, q.nextRunAt)
	if err := q.l.start(ctx); err != nil {
		db.Close()
		return nil, err
	}
	return q, nil
}

// Wait blocks until a job may be ready on one of queues (an empty list
// means queue.DefaultQueue), max elapses or ctx ends (see queue.Waiter).
//
// A push to one of queues, from any process, wakes it through
// LISTEN/NOTIFY, debounced (see Config.Debounce). Wait also returns when
// the earliest pending job of queues becomes due: it looks that time up
// with a cheap index probe per priority and caches it per queue until a
// notification for the queue, a retry, RetryDead or Resume through this
// Queue, or five seconds. So delayed jobs, this process's retries and
// expired leases need no notification; a retry scheduled by another
// process, or a queue resumed elsewhere, is found by the next
// lookup or by the safety poll max. While the LISTEN connection is down
// (see Health) Wait still returns by max. After Close it returns ErrClosed.
func (q *Queue) Wait(ctx context.Context, queues []string, max time.Duration) error {
	if len(queues) == 0 {
		queues = []string{queue.DefaultQueue}
	}
	return q.l.wait(ctx, queues, max)
}

// Health reports the LISTEN connection's state: nil while it listens, else
// why it does not (the last connection error while it reconnects, a
// connection that failed its self-notification round trip, see
// Config.ListenCheck, or ErrClosed after Close). While it is not nil, Waits rely on their safety
// poll and due times. Safe for concurrent use.
func (q *Queue) Health() error { return q.l.getHealth() }

// HealthChanged returns a channel that is closed at the next change of
// Health. Take the channel before reading Health so no change is missed:
//
//	for {
//		changed := q.HealthChanged()
//		if err := q.Health(); err != nil {
//			log.Printf("queue listener down: %v", err)
//		}
//		<-changed
//	}
func (q *Queue) HealthChanged() <-chan struct{} { return q.l.healthChanged() }

// Complete is sqlqueue's Complete; a waiter of this Queue then wakes at
// the time of each retry or snooze it recorded.
func (q *Queue) Complete(ctx context.Context, starts []queue.Lease, outs []queue.Completion) ([]queue.Lease, []error, error) {
	lost, errs, err := q.Queue.Complete(ctx, starts, outs)
	if err != nil {
		return lost, errs, err
	}
	for i, o := range outs {
		if errs[i] == nil && (o.Outcome == queue.OutcomeRetried || o.Outcome == queue.OutcomeSnoozed) {
			q.l.reschedule()
			break
		}
	}
	return lost, errs, nil
}

// RetryDead is sqlqueue's RetryDead; a waiter of this Queue then wakes.
func (q *Queue) RetryDead(ctx context.Context, id string) error {
	err := q.Queue.RetryDead(ctx, id)
	if err == nil {
		q.l.reschedule()
	}
	return err
}

// Resume is sqlqueue's Resume; a waiter of this Queue then wakes if the
// queue has ready jobs.
func (q *Queue) Resume(ctx context.Context, queueName string) error {
	err := q.Queue.Resume(ctx, queueName)
	if err == nil {
		q.l.reschedule()
	}
	return err
}

// Close stops the listener (Waits return ErrClosed), flushes buffered run
// metrics, and closes the pool if the Queue opened it (Open, queue.Open).
// Call it after the goroutines using q are done. Closing twice returns the
// first result.
func (q *Queue) Close() error {
	q.closeOnce.Do(func() {
		q.l.close()
		q.closeErr = errors.Join(q.Queue.Close(), q.db.Close())
		if q.ownsPool {
			q.pool.Close()
		}
	})
	return q.closeErr
}

// Pool returns the pgx pool q works on.
func (q *Queue) Pool() *pgxpool.Pool { return q.pool }

// nextRunAt looks up, per queue, the earliest run_at of its pending jobs
// that hold no unexpired lease (when a waiting job becomes available), 0
// when it has none or is paused. Running jobs are left out: their lease
// expiry is not in the claim index (so that claims are HOT updates), and a
// lease that expires is found by the waiter's next safety poll. It walks the claim index
// (queue, priority DESC, run_at, seq) as a loose index scan: one probe per
// distinct priority, at most maxPriorities of them, so it stays cheap
// however many jobs wait. All queues go in one round trip.
func (q *Queue) nextRunAt(ctx context.Context, queues []string) (map[string]int64, error) {
	query := `WITH RECURSIVE p(priority) AS (
  (SELECT priority FROM ` + q.jobs + ` WHERE state = 'pending' AND queue = $1 ORDER BY priority DESC LIMIT 1)
  UNION ALL
  SELECT (SELECT j.priority FROM ` + q.jobs + ` j WHERE j.state = 'pending' AND j.queue = $1 AND j.priority < p.priority
          ORDER BY j.priority DESC LIMIT 1)
  FROM p WHERE p.priority IS NOT NULL
)
SELECT COALESCE(min((SELECT j.run_at FROM ` + q.jobs + ` j WHERE j.state = 'pending' AND j.queue = $1 AND j.priority = p.priority
                     AND j.lease_expires_at <= $2 ORDER BY j.run_at LIMIT 1)), 0)
FROM (SELECT priority FROM p WHERE priority IS NOT NULL LIMIT ` + fmt.Sprint(maxPriorities) + `) p
WHERE NOT EXISTS (SELECT 1 FROM ` + q.pauses + ` WHERE queue = $1)`
	b := &pgx.Batch{}
	for _, name := range queues {
		b.Queue(query, name, time.Now().UnixMicro())
	}
	br := q.pool.SendBatch(ctx, b)
	defer br.Close()
	out := make(map[string]int64, len(queues))
	for _, name := range queues {
		var at int64
		if err := br.QueryRow().Scan(&at); err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return nil, fmt.Errorf("sqlqueue/postgres: looking up the next due job of %s: %w", name, err)
		}
		out[name] = at
	}
	return out, br.Close()
}
