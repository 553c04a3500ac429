package sqlqueue

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"sync"
	"sync/atomic"
	"time"

	queue "github.com/meridianjobs/meridian/queue/driver"
)

// DB is the database handle a Queue uses: a *sql.DB, or a *sqlx.DB (which
// embeds one). The Queue never closes it unless it was opened by a
// registration subpackage (see Close).
type DB interface {
	Driver() driver.Driver
	Conn(ctx context.Context) (*sql.Conn, error)
	BeginTx(ctx context.Context, opts *sql.TxOptions) (*sql.Tx, error)
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	SetMaxOpenConns(n int)
}

// execer is what one statement runs on: a DB, a *sql.Tx, a *sqlx.Tx or a
// *sql.Conn.
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// Option configures New.
type Option func(*config) error

type config struct {
	table          string
	dialect        Dialect
	visibility     time.Duration
	keepFinished   time.Duration
	keepDead       time.Duration
	workerTTL      time.Duration
	maintainEvery  time.Duration
	metricsKeep    time.Duration
	metricsFlushIn time.Duration
	logger         *slog.Logger
	reads          DB
}

var tableName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,39}$`)

// WithTable names the jobs table (default "meridian_jobs"). The queue's
// other tables take it as a prefix: <table>_pauses, <table>_workers,
// <table>_metrics and <table>_meta. The name must match
// [A-Za-z_][A-Za-z0-9_]{0,39}; it is always quoted in SQL.
func WithTable(name string) Option {
	return func(c *config) error {
		if !tableName.MatchString(name) {
			return fmt.Errorf("sqlqueue: table name %q is not allowed: use 1 to 40 letters, digits or underscores, not starting with a digit", name)
		}
		c.table = name
		return nil
	}
}

// WithVisibilityTimeout sets the lease Reserve gives when it is asked for a
// lease of zero or less (default 15 minutes): how long a reserved job stays
// invisible before another worker may take it over. Pick it comfortably
// longer than your longest handler (the Worker extends leases of long jobs).
func WithVisibilityTimeout(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("sqlqueue: visibility timeout must be positive, not %v", d)
		}
		c.visibility = d
		return nil
	}
}

// WithDialect sets the SQL dialect instead of detecting it from the driver.
func WithDialect(d Dialect) Option {
	return func(c *config) error {
		if _, err := dialectFor(d); err != nil {
			return err
		}
		c.dialect = d
		return nil
	}
}

// WithLogger sets the logger of the errors a Queue handles without
// returning them: a failed maintenance pass or metrics flush, a
// notification that could not be sent, a stored job's tags that do not
// decode. The default discards them.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) error {
		if l == nil {
			return errors.New("sqlqueue: WithLogger needs a logger")
		}
		c.logger = l
		return nil
	}
}

// WithRetention sets how long finished rows are kept. finished is how long
// acked jobs stay in the done state for the dashboard: zero (the default)
// deletes a job when it is acked, which keeps the table smallest. dead is
// how long dead letters are kept before Maintain prunes them (default 7
// days); zero keeps them until they are retried or forgotten.
func WithRetention(finished, dead time.Duration) Option {
	return func(c *config) error {
		if finished < 0 || dead < 0 {
			return fmt.Errorf("sqlqueue: retention must not be negative (finished %v, dead %v)", finished, dead)
		}
		c.keepFinished, c.keepDead = finished, dead
		return nil
	}
}

// WithMaintenance sets how often the maintenance pass runs when Heartbeat
// triggers it (default one minute) and after how long without a heartbeat a
// worker leaves the registry (default two minutes).
func WithMaintenance(every, workerTTL time.Duration) Option {
	return func(c *config) error {
		if every <= 0 || workerTTL <= 0 {
			return fmt.Errorf("sqlqueue: maintenance interval and worker TTL must be positive (%v, %v)", every, workerTTL)
		}
		c.maintainEvery, c.workerTTL = every, workerTTL
		return nil
	}
}

// WithReads sends the reads of the inspection calls (ListJobs,
// QueueStats, Counts, GetJob, OldestReady, DeadSince, CountJobs, Metrics,
// Workers, Paused: what the dashboard reads) to db, a second handle on
// the same database, instead of the queue's own. On SQLite, where New
// limits the queue's handle to one connection (the one writer), they
// then no longer wait for the workers' claims and acks, nor make them
// wait: in WAL mode readers run beside the writer. sqlqueue/sqlite's
// opener passes one for a database file. The Queue never closes db.
func WithReads(db DB) Option {
	return func(c *config) error {
		if db == nil {
			return errors.New("sqlqueue: WithReads needs a database")
		}
		c.reads = db
		return nil
	}
}

// Queue is a queue.Queue stored in a SQL database. It also implements
// queue.BatchPusher, queue.BatchAcker, queue.BatchExtender,
// queue.Inspector, queue.OldestReadyReader, queue.Pauser,
// queue.WorkerRegistry, queue.RunObserver
// and, within one process, queue.Waiter (see Wait).
//
// A Queue is safe for concurrent use by many goroutines, and many processes
// may share one database: every decision about a job (who holds it, whether
// a key is free) is taken by the database.
type Queue struct {
	db  DB
	d   dialect
	cfg config
	t   tableNames
	log *slog.Logger

	qs *renderedQueries // the dialect's named statements, rendered for q
	lf listFlavor       // the dialect's part of the lists (see dialect_lists.go)
	// leaseRows holds the names of lease rows known to exist (they are
	// never deleted), up to maxKnownLeaseRows, so AcquireLease skips its
	// insert for them: limiters acquire slot leases for every job.
	leaseRows     sync.Map
	leaseRowCount atomic.Int64

	readyMu sync.Mutex
	ready   bool
	// changedRows: the MySQL connection was found at first use to report
	// changed rows, not matched ones (no clientFoundRows DSN flag), so an
	// insertion with ON DUPLICATE KEY that skips a row does not count it.
	changedRows atomic.Bool
	// deleteReturning: the MySQL-dialect server was found at first use to
	// be MariaDB, whose deletions return rows (MySQL 8's do not).
	deleteReturning atomic.Bool

	metrics   metricsBuffer
	wake      waker
	announcer announcer

	maintMu   sync.Mutex
	lastMaint time.Time
	holder    string

	closeDB func() error
	// direct, when set, runs the hottest reads (the PostgreSQL claim) on
	// the same database through the driver's own client rather than
	// database/sql (hook.Queue.Direct).
	direct statements

	vac vacuumer // background vacuum checks after many acks

	searchBudget time.Duration // a payload search's time per call (see search)
}

var (
	_ queue.Queue          = (*Queue)(nil)
	_ queue.Inspector      = (*Queue)(nil)
	_ queue.Controller     = (*Queue)(nil)
	_ queue.Scheduler      = (*Queue)(nil)
	_ queue.Reporter       = (*Queue)(nil)
	_ queue.LeaseDefaulter = (*Queue)(nil)
	_ queue.Waiter         = (*Queue)(nil)
)

// New returns a Queue over db. It creates nothing and does no I/O: run
// Setup (or apply Schema in a migration) before first use. The dialect is
// detected from db's driver unless WithDialect names it.
//
// On SQLite New limits db to one open connection (SQLite has one writer;
// one connection makes the process's writers queue in Go instead of
// failing with "database is locked"), and the first use switches the file
// to WAL and sets a busy timeout. The user's DSN needs no flags on any
// dialect.
func New(db DB, opts ...Option) (*Queue, error) {
	if db == nil {
		return nil, errors.New("sqlqueue: New needs a database")
	}
	cfg := config{
		table:          "meridian_jobs",
		visibility:     15 * time.Minute,
		keepDead:       7 * 24 * time.Hour,
		workerTTL:      2 * time.Minute,
		maintainEvery:  time.Minute,
		metricsKeep:    7 * 24 * time.Hour,
		metricsFlushIn: time.Second,
	}
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	if cfg.dialect == "" {
		name, err := detectDialect(db.Driver())
		if err != nil {
			return nil, err
		}
		cfg.dialect = name
	}
	d, err := dialectFor(cfg.dialect)
	if err != nil {
		return nil, err
	}
	log := cfg.logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	q := &Queue{db: db, d: d, cfg: cfg, t: names(d, cfg.table), log: log, holder: queue.NewToken(), searchBudget: searchBudget}
	q.qs = render(d, q.t, d.queries()...)
	q.lf = listFlavorFor(cfg.dialect)
	d.configure(db)
	return q, nil
}

// readDB is the handle of the inspection reads (WithReads), or the
// queue's own.
func (q *Queue) readDB() DB {
	if q.cfg.reads != nil {
		return q.cfg.reads
	}
	return q.db
}

// DefaultLease is the visibility timeout (WithVisibilityTimeout): the lease
// a Worker without its own Lease setting reserves for, and the lease
// Reserve gives when asked for none.
func (q *Queue) DefaultLease() time.Duration { return q.cfg.visibility }

// Dialect reports the SQL dialect q speaks.
func (q *Queue) Dialect() Dialect { return q.d.name() }

// Table reports the name of q's jobs table.
func (q *Queue) Table() string { return q.cfg.table }

// Close flushes buffered run metrics and, if the Queue was opened by
// queue.Open through a registration subpackage, closes its database. A
// Queue made by New leaves the caller's database open. Close does not stop
// other goroutines using q; call it after they are done.
func (q *Queue) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	q.waitAnnounced()
	q.closeVacuum()
	err := q.FlushMetrics(ctx)
	if q.closeDB != nil {
		err = errors.Join(err, q.closeDB())
	}
	return err
}

// rebind readies the text of a statement built at run time (see
// dialect_lists.go), with the table names in place, for the dialect.
func (q *Queue) rebind(text string) string { return q.d.rebind(text) }

// wrap wraps err once with what was being done. An error caused by ctx is
// returned as ctx's error so errors.Is(err, context.Canceled) holds whatever
// the driver reported. A driver error the dialect classifies as a
// configuration error (missing table or database, bad credentials) also
// matches queue.ErrConfig.
func (q *Queue) wrap(ctx context.Context, err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		err = cerr
	} else if !errors.Is(err, queue.ErrConfig) && q.d.isConfig(err) {
		return fmt.Errorf("sqlqueue: "+format+": %w: %w", append(args, queue.ErrConfig, err)...)
	}
	return fmt.Errorf("sqlqueue: "+format+": %w", append(args, err)...)
}

// micros converts a time to the stored form: Unix microseconds.
func micros(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMicro()
}

// fromMicros converts the stored form back; zero stays the zero time.
func fromMicros(us int64) time.Time {
	if us == 0 {
		return time.Time{}
	}
	return time.UnixMicro(us)
}

// nullString stores "" as NULL.
func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// errBadConn tells database/sql to discard a connection.
var errBadConn = driver.ErrBadConn
