// Package sqlqueue is Meridian's SQL driver: one implementation of
// queue.Queue over database/sql for PostgreSQL, MySQL/MariaDB and SQLite,
// with the files of each dialect (dialect_postgres*.go, dialect_mysql*.go,
// dialect_sqlite*.go) behind one seam: each writes its statements whole,
// by name (the list in sqlqueue.go), and New renders them once per Queue with its
// table names, so the shared code runs statements and builds none. It
// works on the *sql.DB (or
// *sqlx.DB) the program already has, and imports no database driver: the
// program, or a registration subpackage (sqlqueue/sqlite, sqlqueue/mysql,
// sqlqueue/postgres), brings one in.
//
//	db, _ := sql.Open("sqlite", "app.db") // import _ "modernc.org/sqlite"
//	q, err := sqlqueue.New(db, sqlqueue.WithTable("jobs"))
//	if err != nil { ... }
//	if err := q.Setup(ctx); err != nil { ... } // or apply sqlqueue.Schema in a migration
//	queue.Dispatch(ctx, q, SendWelcome{UserID: 42})
//	w := queue.NewWorker(q)
//
// A Queue is safe for concurrent use, and any number of processes may share
// one database: leases, unique keys, pauses, the worker registry, metrics
// and the maintenance leader all live in the database. Besides queue.Queue
// it implements queue.Inspector, queue.Controller, queue.Scheduler,
// queue.Reporter, queue.LeaseDefaulter, queue.Waiter and queue.TagMonitor
// (monitored tags' records in _tags and _tag_jobs, written by the Worker
// once a second, never per job).
//
// # Waking workers
//
// Wait (queue.Waiter) is an in-process wake-up: a push, a retry, RetryDead
// or Resume through a Queue value wakes the Workers of the same value at
// once (or when the job's time comes, for a job pushed or retried for
// later). Pushes from other processes, and pushes in a caller's
// transaction (Tx), are seen at the Worker's next Poll, which stays the
// bound on that delay. sqlqueue/postgres adds the cross-process wake-up
// with LISTEN/NOTIFY.
//
// # Tables and migrations
//
// WithTable names the jobs table (default meridian_jobs); the other tables
// take it as a prefix: _pauses, _workers, _run_metrics, _meta, _periodic,
// _uniques, _counts, _batches, _batch_jobs, _fleet, _tags and _tag_jobs.
// New creates nothing. The schema is a series of numbered migrations per dialect
// (embedded SQL files): Setup applies those the tables lack, in order,
// under a lock, so it is safe to run at every start and from several
// processes at once; Migrate and MigrateDown (and `meridian migrate`) move
// to a given version. Teams that own their schema apply Schema(dialect,
// WithTable(...)) in a migration instead. The schema version is recorded
// in the _meta table: a Queue refuses, at first use, missing tables and
// tables of another version with an error matching queue.ErrConfig that
// says what to run. See docs/architecture.md.
// Table names are validated ([A-Za-z_][A-Za-z0-9_]{0,39}) and always
// quoted.
//
// Times are stored as BIGINT Unix microseconds (no parseTime or time zone
// settings needed), payloads as bytes (BYTEA, LONGBLOB, BLOB) so any payload
// round-trips intact, tags and meta as JSON text.
//
// # Jobs, leases and ordering
//
// A job row is pending, done or dead. A pending job is ready, scheduled or
// running according to its run_at and its lease; crash recovery needs no
// sweeper, since a job whose lease expired is claimable again as it is.
// run_at is the job's available-at; the lease expiry is a column of its
// own, lease_expires_at (0 without a lease), so a job whose lease expired
// keeps its place in the claim order. On PostgreSQL and MySQL/MariaDB no
// index holds it, so a claim changes only unindexed columns and writes no
// secondary index entry (on PostgreSQL a HOT update: the table's
// fillfactor is 36, so the claim's new row version, some 70 bytes wider
// with its lease token and worker, finds room on its page beside the old
// one); the reads that test a lease look up the rows they pass, which the
// running list bounds by what the workers report holding. On SQLite the
// claim index ends in it, so counts and lists of ready, scheduled and
// running jobs read the index alone (a claim there changes one indexed
// column, as it did when run_at held the expiry). A row is claimable when
// its run_at has come and its lease_expires_at has passed, and a claim
// passes the rows ahead of it in claim order that are still running. Reserve orders by priority
// (descending), then run_at, then insertion (an autoincrement seq column);
// the claim index is (queue, priority DESC, run_at, seq) over pending rows,
// with lease_expires_at after them on SQLite. Each reserved job gets its own lease token; Complete and
// ExtendMany change or delete by primary key guarded by the token, the
// pending state and an unexpired lease, and report queue.ErrLeaseLost for
// a lease no row matched.
//
// Unique keys are enforced by the database, not by read-then-write: a
// unique index on (queue, unique_key) over pending rows and rows in a
// finished state their unique_hold column names (driver.Job.UniqueStates,
// written only by pushes of jobs that name states). Pushing the ID of
// a dead letter (or of a done job) revives it with its attempts reset and
// a new place in the insertion order.
//
// # Transactions
//
// Tx binds a pusher to the caller's *sql.Tx (or *sqlx.Tx), so
//
//	queue.Dispatch(ctx, q.Tx(tx), Invoice{ID: id})
//
// is visible to workers if and only if the caller commits. A duplicate
// inside the transaction is reported as queue.ErrDuplicate without
// aborting the transaction (also on PostgreSQL).
//
// # Dialect notes
//
// PostgreSQL (12+, pgx stdlib or lib/pq): Reserve is one statement,
// UPDATE ... FROM (SELECT ... FOR UPDATE SKIP LOCKED LIMIT n) RETURNING.
// Indexes are partial (pending rows only). Every push INSERT that stores
// jobs sends one pg_notify on NotifyChannel (the table name plus "_ready"),
// in the same statement, with the names of its jobs' queues, one per line:
// the LISTEN/NOTIFY wake-up of sqlqueue/postgres listens there.
// Payload search runs under SET LOCAL statement_timeout.
//
// MySQL 8.0.1+ and MariaDB 10.6+ (go-sql-driver/mysql, no DSN flags):
// neither has partial indexes and MariaDB has no UPDATE ... RETURNING.
// Active-key uniqueness is a UNIQUE index over a stored generated column
// that holds the key only while the job is pending or in a state its
// unique_hold names (NULLs do not collide).
// Reserve is one short READ COMMITTED transaction: SELECT ... FOR UPDATE
// SKIP LOCKED, then UPDATE by primary key; one the server rolled back to
// break a deadlock is run again. A batch ack, or a batch of start marks or
// extensions, is one statement per kind of change in one short
// transaction, by primary key and (id, token) pairs; only when one changed
// fewer rows than it had leases is it rolled back and redone locking the
// rows first, to learn which leases were lost. On MariaDB an ack that
// deletes is one DELETE ... RETURNING matching the lease tokens, whose
// rows' IDs are checked against the leases in Go. Row triggers keep the
// counts (migration 0018), as on the other dialects.
// A batch push is one INSERT: its
// affected-row count and first AUTO_INCREMENT value tell which jobs it
// stored, with one lookup by ID only when it skipped some.
// Tables use utf8mb4_bin, so IDs, names and keys compare byte for byte.
// The core cannot change the DSN of a *sql.DB you pass to New: for one
// round trip per statement add interpolateParams=true to the DSN (safe with
// the default utf8mb4 collation; no parseTime needed), and call
// SetMaxIdleConns with the same value as SetMaxOpenConns so connections
// are reused rather than reopened. sqlqueue/mysql.Open does both.
//
// SQLite (3.35+, modernc.org/sqlite without cgo, or mattn/go-sqlite3): one
// writer. New limits the *sql.DB to one connection; first use switches the
// file to WAL and sets busy_timeout; multi-statement writes run under BEGIN
// IMMEDIATE, so concurrent writers queue instead of failing with "database
// is locked"; statement journals stay in memory (temp_store=MEMORY). A
// batch ack or start is one statement that finds each row by the seq its
// lease token ends in, the IDs checked against the leases in Go. Because
// the pool has one connection, code holding a *sql.Tx on it must push
// through q.Tx(tx), not q, until the transaction ends.
//
// # Retention and maintenance
//
// By default an acked job is deleted at once, which keeps the hot table
// small. WithRetention(finished, dead) keeps acked jobs in the done state
// for finished (for the dashboard) and dead letters for dead (default
// seven days). Maintain prunes them in batches of 1,000 by primary key,
// found queue by queue on the (state, queue, finished_at, seq) list index
// (the queues with such jobs read from the counts table; MySQL has no
// (state, finished_at) index, which would cost every job an entry since
// MySQL has no partial indexes), together with stale worker entries and
// metrics older than seven days. It
// runs in one process at a time, elected through a lease row in the _meta
// table. Workers run it through Heartbeat once per maintenance interval
// (WithMaintenance, default one minute); deployments without workers call
// Maintain themselves.
//
// # Metrics and inspection
//
// ObserveRun buffers run records in memory (two map updates per finished
// attempt), aggregated per queue, job name and minute, and per hour; the
// process's next heartbeat at least a second after the previous flush (or
// FlushMetrics, Close, or a metrics read in the same process) writes them
// in one transaction, one upsert per queue, name and period, to the
// _run_metrics rows, so every replica reads the same sums. No ack waits
// for it: a process writes its metrics at most once a second however many
// jobs it runs. Each row counts its runtimes in the log-scale buckets of
// driver.RuntimeHistogram, for p50 and p95. Minutes are kept a day, hours
// seven days (pruned by Maintain); Metrics reads minutes, HourlyMetrics
// hours, at most 100,000 rows. Inspection
// is bounded: counts are exact (kept as jobs change, see Counts) except
// running jobs, counted up to 10,000 then reported as 10,000+; lists page
// by keyset in the order of the index that serves them (waiting and
// running jobs in claim order on the claim index, finished ones by
// finish time, newest first, on (state, queue, finished_at, seq)); and
// payload search examines at most 10,000 rows per page, a window at a
// time, and starts no new window after 40 ms (its reads run at most two
// seconds): it reads the window's keys from the index, then whole only
// the jobs whose payload matches. With the opt-in search index
// (EnableSearchIndex: pg_trgm on PostgreSQL, trigram FTS5 on SQLite,
// Mroonga bigrams on MariaDB, none on MySQL) a search the first window does not satisfy
// reads the rest of its page through the index, with the same matches.
//
// Inspection reads use the existing indexes and stay fast on large tables
// (measured in docs/benchmarks.md, BenchmarkInspect): the queues are read
// from the counts table, their priorities by a loose index scan (one
// statement per queue, or per step for all queues on MariaDB),
// each count reads one capped index range per priority of the queue (the
// claim index keeps scheduled jobs, whose run_at is in the future, apart
// from the ready ones), and a list
// without a queue filter merges one ordered index scan per queue (and
// per priority, for waiting jobs). Queues with more than 32 distinct
// priorities, or lists over more than 64 queues, fall back to filtering.
// Running jobs are in no index range of their own
// (see above), so they are counted from what the workers report they hold
// (queue.WorkerInfo Running and Reserved, stored by Heartbeat and summed
// over the workers seen within the worker TTL: O(workers) rows), and
// listed only in the queues some live worker holds jobs in, among the
// first due jobs of each in claim order: four per job held plus 1,000, at
// most 20,000. Jobs are claimed from that head, so a running job is there
// unless that many jobs of a higher priority, or with an earlier run_at,
// came before it since its claim. Jobs held by a process that does not
// heartbeat (a bare Reserve outside a queue.Worker) count as ready and are
// not listed; those of a worker that died count as running until its last
// heartbeat is older than the worker TTL, then as ready until their
// leases expire and another worker takes them. On
// PostgreSQL the reads run in one read-only transaction with
// plan_cache_mode = force_custom_plan, so a driver that caches prepared
// statements (pgx) does not get a generic plan that scans the table,
// lists with enable_sort = off, so a table not analyzed yet (after a bulk
// load) is still read in index order, and jit = off (a plan that must
// sort under enable_sort = off costs past jit_above_cost, and compiling
// it took seconds).
//
// # Errors and logs
//
// Every error is wrapped once with what was being done; an error caused by
// the context is the context's error. Errors no retry can fix match
// queue.ErrConfig, so a Worker stops on them instead of retrying: tables
// that were never set up or have another schema version, and driver errors
// each dialect classifies as configuration (a missing table or database,
// refused credentials). Errors a call handles without returning them (a
// failed maintenance pass or metrics flush triggered by an ack or a
// heartbeat, a notification that could not be sent, a stored job's tags
// that do not decode) go to the logger of WithLogger; without one they are
// discarded.
//
// # Tuning
//
// Reserve many jobs per call (the Worker does) and let the Worker batch
// outcomes through Complete: a claim and a batch of acks are each one
// statement (one short transaction on
// MySQL) whatever the batch size. DispatchMany goes through PushMany: one
// multi-row INSERT ... ON CONFLICT DO NOTHING (ON DUPLICATE KEY on MySQL)
// per chunk of up to 2,000 jobs or 4 MiB of payload, within each
// database's parameter limit. Give PostgreSQL and MySQL pools a few more
// connections than the Worker's concurrency needs for its reservers,
// ackers and heartbeats. Keep WithVisibilityTimeout above your longest
// handler; the Worker extends leases of long jobs.
package sqlqueue
