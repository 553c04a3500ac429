// Package postgres is sqlqueue on PostgreSQL with the extras that need
// pgx: wake-up by LISTEN/NOTIFY instead of polling, a health signal for
// the listener, enqueue inside a pgx.Tx, and bulk loads with COPY. It also
// registers the postgres:// and postgresql:// schemes with queue.Open.
//
//	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
//	...
//	q, err := postgres.New(ctx, pool, sqlqueue.WithTable("jobs"))
//	...
//	defer q.Close()
//	if err := q.Setup(ctx); err != nil { ... } // or apply sqlqueue.Schema in a migration
//	w := queue.NewWorker(q).Poll(30 * time.Second) // Poll is now only the safety net
//
// A *Queue embeds *sqlqueue.Queue, so it is a queue.Queue with every
// ability sqlqueue has (batch push and ack, inspection for the dashboard,
// pauses, the worker registry, metrics) plus queue.Waiter. The core
// package sqlqueue imports no pgx; this one does.
//
// # URLs
//
// Import the package for its side effect and open a queue from
// configuration:
//
//	import _ "github.com/meridianjobs/meridian/sqlqueue/postgres"
//
//	q, err := queue.Open(ctx, "postgres://app@db:5432/app?sslmode=disable")
//
// The URL is pgxpool's connection string (pool_max_conns and the like are
// pgx's; without pool_max_conns the pool holds up to 16 connections).
// sqlqueue's own query parameters (sqlqueue.URLParams: table, setup=false,
// visibility_timeout, retention, ...) are taken out before it reaches pgx;
// setup=false skips creating missing tables when migrations own the schema
// (Setup runs by default). A parameter neither sqlqueue nor pgx reads is
// refused rather than sent to the server as a setting. The queue
// is a *Queue with every extra below and owns its pool: release it with
// Close (queue.Open's result is an io.Closer). Open does the same from a
// connection string in Go.
//
// Programs that only have a *sql.DB (or *sqlx.DB) opened with the "pgx"
// driver may use sqlqueue.New directly and do without the extras.
//
// # LISTEN/NOTIFY
//
// Every push that stores jobs sends a pg_notify on the queue's
// NotifyChannel naming the queues it filled, never one per row: a push in
// the caller's transaction (Tx) inside it, delivered on commit; any other
// push after its commit, from one goroutine per Queue that coalesces the
// pushes made meanwhile into one notification (see
// sqlqueue.Queue.NotifyChannel). New takes one connection out of the pool for good
// (or opens it from Config.ListenDSN, for pools behind a transaction-mode
// pooler such as PgBouncer, where LISTEN does not work) and LISTENs on it.
// Wait, which the Worker calls when it finds nothing to reserve, blocks
// until a notification names one of its queues, then returns so the
// Worker reserves.
//
// A push through this Queue (outside a caller's transaction) also wakes
// this Queue's own waiters at once, in the process, as soon as it has
// committed: a Worker of the process that pushed does not wait for the
// notification's round trip and delivery. Its notification then carries
// a mark of the Queue that sent it, which that Queue's listener skips, and
// only wakes other processes, so it is sent at most once per debounce
// window (their listeners wake at most about that often anyway): at
// 1,000 pushes a second one notification went out for every 1.5 pushes
// before, now at most 333 a second. The mark is a first line left empty
// (a stored queue name is never empty), so a listener of an older release
// reads it as a queue nobody waits on.
//
// Wake-ups by notification are debounced: the first notification after
// a quiet window (Config.Debounce, 3ms by default) wakes the matching
// waiters at once, and the rest of a burst wakes them once more at the
// window's end, so a stream of pushes from other processes does not turn
// into a stream of empty reserves. Waiters on other queues are not woken.
// A push through this Queue is not debounced: it wakes at once as many of
// its queue's waiters as it stored jobs there (each has a job to claim),
// and the queue's other waiters as a notification would. A steady 1,000
// pushes a second otherwise left a waiting Worker asleep until the
// window's end for most jobs. Pushes into a queue its waiters last found
// paused are debounced as notifications are: the waiters could claim
// nothing, and a claim per push would only load the database.
//
// Wait also returns when the earliest pending job of its queues becomes
// due, without any notification: a delayed job or a retry. It looks that
// time up with a loose scan of the claim index (one probe per distinct
// priority, at most 64, passing the running jobs), skipping paused
// queues, and caches it per queue until a notification for the
// queue, a retry, RetryDead or Resume through this Queue, or five seconds.
// What it cannot know (a retry that another process scheduled
// after the lookup, a queue resumed elsewhere, a running job whose lease
// expires: the expiry is in no index, so that claims are HOT updates) is
// found by the next lookup or by the safety poll: Wait always returns
// after max, the Worker's Poll. The lookup runs in a read-only
// transaction of its own that sets plan_cache_mode to force_generic_plan
// (PostgreSQL 12 or later), so its plan is made once per connection
// rather than on every call.
// A job that is ready but that Reserve cannot take (locked by another
// transaction) makes Wait return at once at most once per debounce
// window, so the Worker never spins.
//
// # Health
//
// When the LISTEN connection fails (a server restart, a network cut,
// pg_terminate_backend), the listener reconnects by itself with
// exponential backoff from 100ms to 10s and ±20% jitter, then wakes every
// waiter once, since notifications sent meanwhile are lost. Until then
// Waits still return by their safety poll and due times: jobs are late,
// never lost. Health reports the state (nil while listening, else the
// last connection error, ErrClosed after Close) and HealthChanged gives a
// channel closed at its next change, for readiness probes and alerts:
//
//	for {
//		changed := q.HealthChanged()
//		if err := q.Health(); err != nil {
//			slog.Warn("job queue listener down", "err", err)
//		}
//		<-changed
//	}
//
// Notifications are delivered by the primary only: point the pool (or
// ListenDSN) at the primary, not at a replica.
//
// # Transactions
//
// Tx binds a pusher to the caller's pgx.Tx (from a pgx.Conn or a
// pgxpool.Pool on the same database):
//
//	tx, err := pool.Begin(ctx)
//	...
//	_, err = tx.Exec(ctx, "INSERT INTO users (id, email) VALUES ($1, $2)", id, email)
//	...
//	err = queue.Dispatch(ctx, q.Tx(tx), SendWelcome{UserID: id})
//	...
//	err = tx.Commit(ctx)
//
// The job is visible to workers if and only if the transaction commits,
// and its notification is delivered on commit (pg_notify is
// transactional), so a worker is never woken for a job it cannot see. Tx
// runs sqlqueue's own push statements on the transaction's connection: a
// duplicate unique key is reported as queue.ErrDuplicate (Dispatch: nil)
// without aborting the transaction, and pushing a dead letter's ID
// revives it. For a *sql.Tx use the embedded queue: q.Queue.Tx(sqlTx).
//
// # COPY
//
// PushMany (and so queue.DispatchMany) loads a batch of 250 jobs or more
// with one COPY statement, notified after it commits, when no job
// in it has a unique key and no ID repeats within it. COPY is all or
// nothing: if an ID is already stored (an active job, or a dead letter to
// revive), the batch goes again through sqlqueue's multi-row INSERT ... ON
// CONFLICT DO NOTHING, which decides job by job; batches with unique keys
// and small batches take that path at once (the 250 comes from
// BenchmarkPushMany; docs/benchmarks.md has the figures). Batches pushed
// through Tx never use COPY, whose failure would abort the caller's
// transaction.
package postgres
