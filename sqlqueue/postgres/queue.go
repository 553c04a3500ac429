package postgres

import (
	"context"
	"crypto/tls"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
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
	// the window's end. A push through this Queue wakes a waiter of its
	// own at once regardless (see the package documentation). Zero means
	// DefaultDebounce.
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
	// This process's pushes wake its own waiters at once, not through a
	// notification's round trip (see the package doc).
	hook.Of(sq).Local(q.l.origin, cfg.Debounce, q.l.pushedHere)
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
// when it has none, duePaused when it is paused. Running jobs are left out: their lease
// expiry is not in the claim index (so that claims are HOT updates), and a
// lease that expires is found by the waiter's next safety poll. It walks the claim index
// (queue, priority DESC, run_at, seq) as a loose index scan: one probe per
// distinct priority, at most maxPriorities of them, so it stays cheap
// however many jobs wait. All queues go in one round trip.
//
// The lookups run in a transaction of their own that forces the
// statement's generic plan (plan_cache_mode = force_generic_plan, for
// that transaction alone): PostgreSQL otherwise kept planning it afresh
// on every call on most of the pool's connections (why is not
// established: in psql its generic plan is kept after five custom ones),
// about 0.4 ms of server CPU a lookup, where it runs in some 0.06 (run AX
// in docs/benchmarks-history.md). The transaction's BEGIN, SET LOCAL and
// COMMIT go in the same round trip; a lookup that fails leaves its
// transaction open, and the pool closes such a connection on its release.
func (q *Queue) nextRunAt(ctx context.Context, queues []string) (map[string]int64, error) {
	query := `WITH RECURSIVE p(priority) AS (
  (SELECT priority FROM ` + q.jobs + ` WHERE state = 'pending' AND queue = $1 ORDER BY priority DESC LIMIT 1)
  UNION ALL
  SELECT (SELECT j.priority FROM ` + q.jobs + ` j WHERE j.state = 'pending' AND j.queue = $1 AND j.priority < p.priority
          ORDER BY j.priority DESC LIMIT 1)
  FROM p WHERE p.priority IS NOT NULL
)
SELECT CASE WHEN EXISTS (SELECT 1 FROM ` + q.pauses + ` WHERE queue = $1) THEN ` + fmt.Sprint(duePaused) + ` ELSE (
  SELECT COALESCE(min((SELECT j.run_at FROM ` + q.jobs + ` j WHERE j.state = 'pending' AND j.queue = $1 AND j.priority = p.priority
                       AND j.lease_expires_at <= $2 ORDER BY j.run_at LIMIT 1)), 0)
  FROM (SELECT priority FROM p WHERE priority IS NOT NULL LIMIT ` + fmt.Sprint(maxPriorities) + `) p) END`
	b := &pgx.Batch{}
	b.Queue("BEGIN READ ONLY")
	b.Queue("SET LOCAL plan_cache_mode = force_generic_plan")
	for _, name := range queues {
		b.Queue(query, name, time.Now().UnixMicro())
	}
	b.Queue("COMMIT")
	br := q.pool.SendBatch(ctx, b)
	defer br.Close()
	for range 2 {
		if _, err := br.Exec(); err != nil {
			return nil, fmt.Errorf("sqlqueue/postgres: looking up the next due jobs: %w", err)
		}
	}
	out := make(map[string]int64, len(queues))
	for _, name := range queues {
		var at int64
		if err := br.QueryRow().Scan(&at); err != nil {
			return nil, fmt.Errorf("sqlqueue/postgres: looking up the next due job of %s: %w", name, err)
		}
		out[name] = at
	}
	if _, err := br.Exec(); err != nil {
		return nil, fmt.Errorf("sqlqueue/postgres: looking up the next due jobs: %w", err)
	}
	return out, br.Close()
}

// poolStatements runs sqlqueue's statements on the pool through pgx
// itself, not database/sql: the Queue's claim reads its rows this way
// (hook.Queue.Direct), scanning each column straight into its target
// where database/sql would first convert every column of every row into
// a driver.Value.
type poolStatements struct{ pool *pgxpool.Pool }

func (s poolStatements) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	tag, err := s.pool.Exec(ctx, query, args...)
	return tag.RowsAffected(), err
}

func (s poolStatements) Query(ctx context.Context, query string, args ...any) (hook.Rows, error) {
	return s.pool.Query(ctx, query, args...)
}

// ErrClosed is returned by Wait after Close.
var ErrClosed = errors.New("sqlqueue/postgres: queue is closed")

// errConnecting is the health before the first LISTEN succeeded.
var errConnecting = errors.New("sqlqueue/postgres: listener is connecting")

// Reconnect backoff of the listener: exponential from minBackoff to
// maxBackoff with ±20% jitter; it starts over after a connection that
// stayed up for maxBackoff.
const (
	minBackoff = 100 * time.Millisecond
	maxBackoff = 10 * time.Second
	// dueTTL is how long a looked-up due time is trusted when nothing in
	// this process invalidated it.
	dueTTL = 5 * time.Second
	// maxPriorities bounds the loose index scan of the due lookup.
	maxPriorities = 64
)

// TCP keepalive of the LISTEN connection: a peer that vanished (a host or
// network gone) is found by the kernel in about Idle + Count*Interval,
// 30 s, even when no self-notification is due. A peer that still
// acknowledges TCP but passes no bytes (a stuck proxy) is found by the
// self-notification round trip instead (Config.ListenCheck).
var listenKeepAlive = net.KeepAliveConfig{Enable: true, Idle: 15 * time.Second, Interval: 5 * time.Second, Count: 3}

// listener owns the LISTEN connection and the waiters it wakes.
type listener struct {
	channel string
	// ping is the listener's own channel for its self-notifications, so
	// that no other process receives them.
	ping string
	// check is how long the connection may stay silent before a
	// self-notification is sent, and how long that round trip may take.
	check    time.Duration
	dial     func(ctx context.Context) (*pgx.Conn, error)
	debounce time.Duration
	// origin marks the notifications of this Queue's own pushes (see
	// hook.Queue.Local), whose waiters were woken without them.
	origin string
	log    *slog.Logger
	// lookup returns, per queue, the earliest run_at (Unix µs) of its
	// pending jobs, 0 when it has none, duePaused when it is paused.
	lookup func(ctx context.Context, queues []string) (map[string]int64, error)

	mu         sync.Mutex
	waiters    map[*waiter]struct{}
	health     error
	healthCh   chan struct{}
	quietUntil time.Time       // end of the current debounce window
	batch      map[string]bool // queues notified during the window
	batchAll   bool
	armed      bool // a timer delivers batch at quietUntil
	due        map[string]dueEntry
	dueGen     uint64    // counts invalidations, so a lookup that raced one is not cached
	readyAt    time.Time // last Wait that returned at once for a ready job

	stop   context.CancelFunc
	done   chan struct{}
	closed chan struct{}
}

type waiter struct {
	queues []string
	ch     chan struct{} // capacity 1: a wake-up or a reschedule
	woken  bool          // set with the send when a notification matched
}

type dueEntry struct {
	at      int64 // earliest run_at in Unix µs; 0 means no pending job, duePaused a paused queue
	fetched time.Time
}

// duePaused is the due time looked up for a paused queue: none, and no
// push wakes its waiters at once (see pushedHere).
const duePaused = -1

func newListener(channel string, dial func(context.Context) (*pgx.Conn, error), debounce, check time.Duration, log *slog.Logger,
	lookup func(context.Context, []string) (map[string]int64, error)) *listener {
	return &listener{
		channel:  channel,
		ping:     fmt.Sprintf("meridian_ping_%016x", rand.Uint64()),
		origin:   fmt.Sprintf("%016x", rand.Uint64()),
		check:    check,
		dial:     dial,
		debounce: debounce,
		log:      log,
		lookup:   lookup,
		waiters:  make(map[*waiter]struct{}),
		health:   errConnecting,
		healthCh: make(chan struct{}),
		due:      make(map[string]dueEntry),
		done:     make(chan struct{}),
		closed:   make(chan struct{}),
	}
}

// start connects and LISTENs once under ctx, failing if it cannot, then
// keeps the connection in a goroutine until close.
func (l *listener) start(ctx context.Context) error {
	conn, err := l.connect(ctx)
	if err != nil {
		return err
	}
	l.setHealth(nil)
	runCtx, stop := context.WithCancel(context.Background())
	l.stop = stop
	go l.run(runCtx, conn)
	return nil
}

// connect dials and LISTENs on the channel and on the ping channel,
// within connectTimeout so that a dial into a dead path fails and is
// retried rather than hanging.
func (l *listener) connect(ctx context.Context) (*pgx.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, l.connectTimeout())
	defer cancel()
	conn, err := l.dial(ctx)
	if err != nil {
		return nil, fmt.Errorf("sqlqueue/postgres: connecting the listener: %w", err)
	}
	keepAlive(conn)
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{l.channel}.Sanitize()+"; LISTEN "+pgx.Identifier{l.ping}.Sanitize()); err != nil {
		closeConn(conn)
		return nil, fmt.Errorf("sqlqueue/postgres: listening on %s: %w", l.channel, err)
	}
	return conn, nil
}

// connectTimeout bounds one connection attempt of the listener.
func (l *listener) connectTimeout() time.Duration { return max(2*l.check, 10*time.Second) }

// keepAlive turns on TCP keepalive (listenKeepAlive) on conn's socket.
func keepAlive(conn *pgx.Conn) {
	nc := conn.PgConn().Conn()
	if tc, ok := nc.(*tls.Conn); ok {
		nc = tc.NetConn()
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		_ = tc.SetKeepAliveConfig(listenKeepAlive)
	}
}

func closeConn(conn *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = conn.Close(ctx)
}

// run receives notifications on conn and, when it drops, reconnects with
// backoff until ctx ends.
func (l *listener) run(ctx context.Context, conn *pgx.Conn) {
	defer close(l.done)
	backoff := minBackoff
	for {
		up := time.Now()
		err := l.receive(ctx, conn)
		closeConn(conn)
		if ctx.Err() != nil {
			return
		}
		if time.Since(up) >= maxBackoff {
			backoff = minBackoff
		}
		l.setHealth(fmt.Errorf("sqlqueue/postgres: listener connection lost: %w", err))
		l.log.Warn("sqlqueue/postgres: listener connection lost; reconnecting", "channel", l.channel, "err", err)
		for {
			if !sleep(ctx, jitter(backoff)) {
				return
			}
			backoff = min(backoff*2, maxBackoff)
			conn, err = l.connect(ctx)
			if err == nil {
				break
			}
			if ctx.Err() != nil {
				return
			}
			l.setHealth(err)
			l.log.Warn("sqlqueue/postgres: listener reconnect failed", "channel", l.channel, "err", err, "retry_in", backoff)
		}
		// Notifications sent while the connection was down are lost: wake
		// everyone once so that nothing waits for its safety poll. This
		// comes before Health turns nil, so a Wait that starts once Health
		// reports the listener healthy is woken only by a real notification.
		l.wakeAll()
		l.setHealth(nil)
		l.log.Info("sqlqueue/postgres: listener reconnected", "channel", l.channel)
	}
}

// ErrUnresponsive is in Health's error when the LISTEN connection did not
// complete a self-notification round trip in time (see Config.ListenCheck):
// it may look open while passing no bytes (a stuck proxy or NAT), so the
// listener drops it and dials again.
var ErrUnresponsive = errors.New("sqlqueue/postgres: listener connection unresponsive")

// receive hands every notification on conn to notified until the
// connection fails or ctx ends. When nothing arrived for l.check it sends
// itself a notification on its ping channel; if that does not come back
// within l.check more, it returns ErrUnresponsive.
func (l *listener) receive(ctx context.Context, conn *pgx.Conn) error {
	var token string // the pending self-notification, "" when none
	silentUntil := time.Now().Add(l.check)
	var pingDeadline time.Time
	for {
		until := silentUntil
		if token != "" {
			until = pingDeadline
		}
		wctx, cancel := context.WithDeadline(ctx, until)
		n, err := conn.WaitForNotification(wctx)
		cancel()
		if err != nil {
			if ctx.Err() != nil || !errors.Is(err, context.DeadlineExceeded) || conn.IsClosed() {
				return err
			}
			if token != "" {
				return fmt.Errorf("%w: no self-notification within %v", ErrUnresponsive, l.check)
			}
			token = fmt.Sprintf("%016x", rand.Uint64())
			pingDeadline = time.Now().Add(l.check)
			pctx, cancel := context.WithDeadline(ctx, pingDeadline)
			// The channel is spelled in the statement so that pg_stat_activity
			// shows which listener's connection this is.
			_, err := conn.Exec(pctx, "SELECT pg_notify('"+l.ping+"', $1)", token)
			cancel()
			if err != nil {
				if ctx.Err() != nil {
					return err
				}
				return fmt.Errorf("%w: sending a self-notification: %w", ErrUnresponsive, err)
			}
			continue
		}
		silentUntil = time.Now().Add(l.check)
		if n.Channel == l.ping {
			if n.Payload == token {
				token = ""
			}
			continue
		}
		if n.Channel != l.channel {
			continue
		}
		l.deliver(n.Payload)
	}
}

// deliver wakes the waiters a notification's payload names, unless this
// Queue's own push sent it: its waiters were woken at once (see
// hook.Queue.Local).
func (l *listener) deliver(payload string) {
	queues, all, origin := hook.ParsePayload(payload)
	if origin == l.origin {
		return
	}
	l.notified(queues, all)
}

// notified records a notification for queues (all: every queue). The
// due-time cache of those queues is dropped at once; waiters are woken at
// once if no wake-up happened in the last debounce window, else once at
// the window's end for everything notified during it.
func (l *listener) notified(queues []string, all bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.forgetDueLocked(queues, all)
	l.debounceLocked(queues, all)
}

// forgetDueLocked drops the cached due times of queues (all: every queue):
// a job was pushed there.
func (l *listener) forgetDueLocked(queues []string, all bool) {
	l.dueGen++
	if all {
		clear(l.due)
	}
	for _, name := range queues {
		delete(l.due, name)
	}
}

// pushedHere is the local waker (hook.Queue.Local): a push through this
// Queue stored jobs[i] jobs in queues[i] and has committed. For each
// queue it wakes up to that many of the queue's waiters at once, whatever
// the debounce window, since each has a job to claim: a stream of pushes
// at 1,000 a second otherwise kept a waiting Worker asleep until the
// window's end, up to Debounce of latency on most jobs. Waiters beyond
// that count may find nothing the others left, so they are woken as a
// notification from another process would wake them (debounced), which
// still wakes every waiter of those queues within the window. So are all
// the waiters of a queue found paused by their last lookup: they would
// claim nothing, and a stream of pushes into a paused queue must not turn
// into a claim per push.
func (l *listener) pushedHere(queues []string, jobs []int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var rest, pushed []string // the queues with waiters left unwoken; not paused
	for i, name := range queues {
		if e, ok := l.due[name]; ok && e.at == duePaused && time.Since(e.fetched) <= dueTTL {
			// Paused when its waiters last looked: they could claim
			// nothing, so a stream of pushes must not wake them for each.
			// A push leaves it paused, so the cached entry stays.
			rest = append(rest, name)
			continue
		}
		pushed = append(pushed, name)
		n := jobs[i]
		for w := range l.waiters {
			if !slices.Contains(w.queues, name) {
				continue
			}
			if n == 0 {
				rest = append(rest, name)
				break
			}
			n--
			l.wakeOneLocked(w)
		}
	}
	if len(pushed) > 0 {
		// Not for paused queues alone: a lookup under way still caches
		// what it finds (see nextDue).
		l.forgetDueLocked(pushed, false)
	}
	if len(rest) > 0 {
		l.debounceLocked(rest, false)
	}
}

// debounceLocked wakes the waiters on queues (all: every waiter) at once
// if no wake-up happened in the last debounce window, else once at the
// window's end for everything notified during it.
func (l *listener) debounceLocked(queues []string, all bool) {
	now := time.Now()
	if !now.Before(l.quietUntil) {
		l.quietUntil = now.Add(l.debounce)
		l.wakeLocked(queues, all)
		return
	}
	if l.batch == nil {
		l.batch = make(map[string]bool)
	}
	for _, name := range queues {
		l.batch[name] = true
	}
	l.batchAll = l.batchAll || all
	if !l.armed {
		l.armed = true
		time.AfterFunc(l.quietUntil.Sub(now), l.flush)
	}
}

// wakeAll wakes every waiter now, bypassing the debounce window, and
// forgets every cached due time.
func (l *listener) wakeAll() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.dueGen++
	clear(l.due)
	l.wakeLocked(nil, true)
}

// flush delivers the notifications gathered during a debounce window.
func (l *listener) flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.armed = false
	queues := make([]string, 0, len(l.batch))
	for name := range l.batch {
		queues = append(queues, name)
	}
	all := l.batchAll
	l.batch, l.batchAll = nil, false
	l.quietUntil = time.Now().Add(l.debounce)
	l.wakeLocked(queues, all)
}

// wakeLocked wakes the waiters on any of queues (all: every waiter).
func (l *listener) wakeLocked(queues []string, all bool) {
	for w := range l.waiters {
		if all || slices.ContainsFunc(w.queues, func(name string) bool { return slices.Contains(queues, name) }) {
			l.wakeOneLocked(w)
		}
	}
}

// wakeOneLocked wakes w, which stops waiting.
func (l *listener) wakeOneLocked(w *waiter) {
	w.woken = true
	delete(l.waiters, w)
	select {
	case w.ch <- struct{}{}:
	default:
	}
}

// reschedule forgets every cached due time and makes every waiter look
// its due time up again: this process made a job due earlier than the
// cache may know (a retry's time, RetryDead, Resume).
func (l *listener) reschedule() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.dueGen++
	clear(l.due)
	for w := range l.waiters {
		select {
		case w.ch <- struct{}{}:
		default:
		}
	}
}

// wait is Queue.Wait.
func (l *listener) wait(ctx context.Context, queues []string, max time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	select {
	case <-l.closed:
		return ErrClosed
	default:
	}
	if max <= 0 {
		return nil
	}
	deadline := time.Now().Add(max)
	w := &waiter{queues: queues, ch: make(chan struct{}, 1)}
	l.mu.Lock()
	l.waiters[w] = struct{}{}
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		delete(l.waiters, w)
		l.mu.Unlock()
	}()
	timer := time.NewTimer(max)
	defer timer.Stop()
	for {
		// Registered first, looked up second: a notification between the
		// two still reaches w.ch.
		due, err := l.nextDue(ctx, queues)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			l.log.Debug("sqlqueue/postgres: looking up the next due job; relying on the safety poll", "err", err)
		}
		until := time.Until(deadline)
		if !due.IsZero() {
			until = min(until, l.readyDelay(due))
		}
		if until <= 0 {
			return nil
		}
		timer.Reset(until)
		select {
		case <-w.ch:
			l.mu.Lock()
			woken := w.woken
			l.mu.Unlock()
			if woken {
				return nil
			}
		case <-timer.C:
			// max elapsed, or a job's due time came: the caller reserves.
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-l.closed:
			return ErrClosed
		}
	}
}

// readyDelay is how long a waiter whose earliest job is due at due sleeps.
// A job that is already ready returns at once, but at most once per
// debounce window: a ready job the caller's Reserve cannot take (locked by
// another transaction) must not make the caller spin.
func (l *listener) readyDelay(due time.Time) time.Duration {
	now := time.Now()
	if due.After(now) {
		return due.Sub(now)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	next := l.readyAt.Add(l.debounce)
	if !next.After(now) {
		l.readyAt = now
		return 0
	}
	l.readyAt = next
	return next.Sub(now)
}

// nextDue returns the earliest time a pending job of queues may be
// reserved (possibly in the past: one is ready), or the zero time when
// none is known. Due times are cached per queue until a notification for
// the queue, a reschedule, the time itself, or dueTTL.
func (l *listener) nextDue(ctx context.Context, queues []string) (time.Time, error) {
	now := time.Now()
	var best int64
	var missing []string
	l.mu.Lock()
	gen := l.dueGen
	for _, name := range queues {
		e, ok := l.due[name]
		if !ok || now.Sub(e.fetched) > dueTTL || (e.at > 0 && e.at <= now.UnixMicro()) {
			missing = append(missing, name)
			continue
		}
		if e.at > 0 && (best == 0 || e.at < best) {
			best = e.at
		}
	}
	l.mu.Unlock()
	if len(missing) > 0 {
		got, err := l.lookup(ctx, missing)
		if err != nil {
			if best == 0 {
				return time.Time{}, err
			}
			return time.UnixMicro(best), err
		}
		l.mu.Lock()
		for _, name := range missing {
			at := got[name]
			if at > 0 && (best == 0 || at < best) {
				best = at
			}
			// Not cached if a notification or reschedule came while the
			// lookup ran: it may not have seen that job.
			if gen == l.dueGen && (at <= 0 || at > now.UnixMicro()) {
				l.due[name] = dueEntry{at: at, fetched: now}
			}
		}
		l.mu.Unlock()
	}
	if best == 0 {
		return time.Time{}, nil
	}
	return time.UnixMicro(best), nil
}

// close stops the listener and makes every Wait return ErrClosed.
func (l *listener) close() {
	select {
	case <-l.closed:
		return
	default:
	}
	close(l.closed)
	if l.stop != nil {
		l.stop()
		<-l.done
	}
	l.setHealth(ErrClosed)
}

func (l *listener) setHealth(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err == l.health {
		return
	}
	l.health = err
	close(l.healthCh)
	l.healthCh = make(chan struct{})
}

func (l *listener) getHealth() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.health
}

func (l *listener) healthChanged() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.healthCh
}

// jitter spreads d by ±20%.
func jitter(d time.Duration) time.Duration {
	return time.Duration(float64(d) * (0.8 + 0.4*rand.Float64()))
}

// sleep waits d and reports whether ctx is still live.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
