package sqlqueue

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/meridianjobs/meridian/internal/pushgroup"
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
	pushLanes      *int // WithPushLanes; nil: the dialect's default
}

var tableName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,39}$`)

// WithTable names the jobs table (default "meridian_jobs"). The queue's
// other tables take it as a prefix: <table>_pauses, <table>_workers,
// <table>_run_metrics, <table>_meta, <table>_periodic, <table>_uniques,
// <table>_counts, <table>_batches, <table>_batch_jobs and <table>_fleet.
// The name must match
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
// days), and finished batches and graphs with them; zero keeps them until
// they are retried or forgotten (and batches and graphs for good).
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

// MaxPushLanes is the most push lanes WithPushLanes accepts, the same
// on every driver.
const MaxPushLanes = pushgroup.MaxLanes

// WithPushLanes sets how many single pushes (Push, so Dispatch) of the
// Queue run on their own at once; a Push arriving while that many run
// waits, and the Pushes waiting when a lane frees go to the database
// together as one multi-row insertion (one statement, one commit), each answered
// as if it had run alone. At a low rate nothing waits; at a high rate
// from many goroutines the database's work per job falls. 0 runs every
// Push on its own, as a plain INSERT; n must be 0 to MaxPushLanes. The
// default is the dialect's: 1 on SQLite (one writer), 2 on PostgreSQL
// and MySQL/MariaDB (docs/benchmarks.md, "Dispatch from many
// goroutines").
func WithPushLanes(n int) Option {
	return func(c *config) error {
		if err := pushgroup.CheckLanes(n); err != nil {
			return fmt.Errorf("sqlqueue: WithPushLanes: %w", err)
		}
		c.pushLanes = &n
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
	cursors   claimCursors // where the last full claim of each queue ended
	announcer announcer
	group     pushgroup.Group // Push's coalescing (pushgroup.go)

	maintMu   sync.Mutex
	lastMaint time.Time
	// maintBG is the pass an idle Wait started (maintainInBackground):
	// Close cancels it and waits.
	maintBG struct {
		cancel  context.CancelFunc // of the running pass; nil when none
		running bool
		closed  bool
		wg      sync.WaitGroup
	}
	holder string

	closeDB func() error
	// direct, when set, runs the hottest reads (the PostgreSQL claim) on
	// the same database through the driver's own client rather than
	// database/sql (hook.Queue.Direct).
	direct statements

	vac vacuumer // background vacuum checks after many acks
	// unnestLeases is set once a lease statement found no leases function
	// (PostgreSQL tables one version down, its migration undone while this
	// release runs): from then on the statements read unnest, as before it.
	unnestLeases atomic.Bool

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
		metricsKeep:    queue.MetricsRetention,
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
	q.group.Name = "sqlqueue"
	q.qs = render(d, q.t, d.queries()...)
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
	q.waitGrouped()
	q.waitAnnounced()
	q.closeVacuum()
	q.closeMaintenance()
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

// The states stored in the state column. A pending job is ready,
// scheduled or running depending on run_at (the job's available-at) and its
// lease expiry, which has a column of its own, lease_expires_at (0 when no
// lease is held): a claim changes no indexed column, and a job whose lease
// expired is claimed again at its own place in the claim order (priority,
// run_at, seq), not behind the jobs queued after it.
const (
	statePending = "pending"
	stateDone    = "done"
	stateDead    = "dead"
	// stateGrouped is a group member waiting for a gather (driver.StateGrouped).
	stateGrouped = "grouped"
	// stateSequenced is a sequence member waiting behind its sequence's
	// head (driver.StateSequenced): no claim sees it.
	stateSequenced = "sequenced"
	// stateCancelled is a job cancelled before it finished. A job
	// cancelled while it ran keeps its lease token, so the worker that
	// holds it can find it (CancelledSince).
	stateCancelled = "cancelled"
)

// jobCols lists the columns a jobScanner reads, in order, on every
// dialect: the statements that read whole jobs select them.
const jobCols = "id, seq, queue, name, payload, priority, attempts, max_attempts, timeout_us, unique_key, tags, meta, available_at, run_at, created_at, updated_at, finished_at, last_error, lease_token, snoozes, retry_until, state, lease_expires_at"

// row is one stored job with the columns the Job type does not carry.
type row struct {
	job queue.Job
	seq int64
	// runAt is when the row may next be claimed: run_at, or the lease
	// expiry while a lease is held (the later of the two).
	runAt int64
	// dueAt is run_at as stored, whether or not a lease is held.
	dueAt      int64
	updatedAt  int64
	finishedAt int64
	state      string
	// decodeErr reports tags or meta that could not be decoded.
	decodeErr error
}

type scanner interface{ Scan(dest ...any) error }

// jobScanner reads rows of jobCols into
// row values. Its scan destinations are made once and reused for every
// row: a claim of 1,000 rows scans 1,000 times into the same 23 targets
// instead of allocating each row's targets and its destination list.
type jobScanner struct {
	f    jobFields
	dest []any
}

// jobFields are the scan targets of the columns a row does not hold in
// its own type.
type jobFields struct {
	r                              row
	uniqueKey, leaseToken          sql.NullString
	tags, meta                     string
	timeoutUS, avail, created      int64
	priority, attempts, maxAttempt int64
	snoozes, retryUntil, expiry    int64
}

// newJobScanner returns a scanner of jobCols rows followed by the columns
// extra point to.
func newJobScanner(extra ...any) *jobScanner {
	s := &jobScanner{}
	f := &s.f
	s.dest = append([]any{&f.r.job.ID, &f.r.seq, &f.r.job.Queue, &f.r.job.Name, &f.r.job.Payload, &f.priority, &f.attempts, &f.maxAttempt,
		&f.timeoutUS, &f.uniqueKey, &f.tags, &f.meta, &f.avail, &f.r.runAt, &f.created, &f.r.updatedAt, &f.r.finishedAt,
		&f.r.job.LastError, &f.leaseToken, &f.snoozes, &f.retryUntil, &f.r.state, &f.expiry}, extra...)
	return s
}

// scan reads one row from sc. A tags or meta column that is not valid
// JSON leaves the field empty and is reported in row.decodeErr, not
// failed: one bad row must not stop a claim or a listing.
func (s *jobScanner) scan(sc scanner) (row, error) {
	f := &s.f
	f.r = row{}
	if err := sc.Scan(s.dest...); err != nil {
		return row{}, err
	}
	r := f.r
	r.job.UniqueKey = f.uniqueKey.String
	r.job.LeaseToken = f.leaseToken.String
	r.dueAt = r.runAt
	r.runAt = max(r.runAt, f.expiry)
	f.decode(&r)
	r.setLease()
	return r, nil
}

// decode fills the job's fields that are stored in another form than the
// Job type's: numbers as int64, times as microseconds, tags and meta as
// JSON text.
func (f *jobFields) decode(r *row) {
	if r.job.Payload == nil {
		r.job.Payload = []byte{}
	}
	r.job.Priority, r.job.Attempts, r.job.MaxAttempts = int(f.priority), int(f.attempts), int(f.maxAttempt)
	r.job.Timeout = time.Duration(f.timeoutUS) * time.Microsecond
	r.job.Snoozes = int(f.snoozes)
	r.job.RetryUntil = fromMicros(f.retryUntil)
	r.job.AvailableAt = fromMicros(f.avail)
	r.job.CreatedAt = fromMicros(f.created)
	if f.tags != "" {
		if err := json.Unmarshal([]byte(f.tags), &r.job.Tags); err != nil {
			r.decodeErr = fmt.Errorf("decoding the tags of job %s: %w", r.job.ID, err)
		}
	}
	if f.meta != "" {
		if err := json.Unmarshal([]byte(f.meta), &r.job.Meta); err != nil {
			r.decodeErr = errors.Join(r.decodeErr, fmt.Errorf("decoding the meta of job %s: %w", r.job.ID, err))
		}
	}
}

// logDecode logs the tags or meta of r that could not be decoded.
func (q *Queue) logDecode(r row) {
	if r.decodeErr != nil {
		q.log.Warn("sqlqueue: a stored job's tags or meta are not valid JSON; read without them", "table", q.t.raw, "job", r.job.ID, "err", r.decodeErr)
	}
}

// scanJob reads one row of jobCols (then extra); read many with one
// jobScanner.
func scanJob(sc scanner, extra ...any) (row, error) {
	return newJobScanner(extra...).scan(sc)
}

// setLease sets the job's lease expiry from runAt once runAt is final.
func (r *row) setLease() {
	if r.job.LeaseToken != "" {
		r.job.LeaseExpiresAt = fromMicros(r.runAt)
	}
}

// info turns a row into the inspection view, deriving the state at now.
func (r row) info(now int64) queue.JobInfo {
	ji := queue.JobInfo{Job: r.job, UpdatedAt: fromMicros(r.updatedAt), FinishedAt: fromMicros(r.finishedAt)}
	switch {
	case r.state == stateDone:
		ji.State = queue.StateDone
	case r.state == stateDead:
		ji.State = queue.StateDead
	case r.state == stateCancelled:
		ji.State = queue.StateCancelled
	case r.state == stateGrouped:
		ji.State = queue.StateGrouped
	case r.state == stateSequenced:
		ji.State = queue.StateSequenced
	case r.runAt <= now:
		ji.State = queue.StateReady
	case r.job.LeaseToken != "":
		ji.State = queue.StateRunning
	default:
		ji.State = queue.StateScheduled
	}
	if ji.State != queue.StateRunning {
		ji.LeaseToken = ""
		ji.LeaseExpiresAt = time.Time{}
	}
	return ji
}

// encodeTags and encodeMeta store tags and meta as JSON text; empty is "".
// Marshalling strings and maps of strings cannot fail.
func encodeTags(tags []string) string {
	if len(tags) == 0 {
		return ""
	}
	b, _ := json.Marshal(tags)
	return string(b)
}

func encodeMeta(meta map[string]string) string {
	if len(meta) == 0 {
		return ""
	}
	b, _ := json.Marshal(meta)
	return string(b)
}

// maxWakeTimes bounds the future wake-up times a Queue remembers (see
// waker.at); beyond it the latest are dropped and the waiters' own max
// covers them.
const maxWakeTimes = 1024

// waker is the in-process wake-up behind Queue.Wait: a broadcast channel,
// closed and replaced on every signal, and the future times at which a
// job this process pushed or released becomes ready.
type waker struct {
	mu    sync.Mutex
	ch    chan struct{} // closed by the next signal; nil until a waiter asks
	times []time.Time   // sorted, at most maxWakeTimes
	timer *time.Timer   // fires at times[0]
}

// wait returns the channel the next signal closes.
func (w *waker) wait() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ch == nil {
		w.ch = make(chan struct{})
	}
	return w.ch
}

// signal wakes every current waiter.
func (w *waker) signal() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.signalLocked()
}

func (w *waker) signalLocked() {
	if w.ch != nil {
		close(w.ch)
		w.ch = nil
	}
}

// at wakes the waiters at t: now if t is not in the future.
func (w *waker) at(t time.Time) {
	if !time.Now().Before(t) {
		w.signal()
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	i, found := slices.BinarySearchFunc(w.times, t, time.Time.Compare)
	if found || i >= maxWakeTimes {
		return
	}
	w.times = slices.Insert(w.times, i, t)
	if len(w.times) > maxWakeTimes {
		w.times = w.times[:maxWakeTimes]
	}
	if i == 0 {
		w.resetLocked()
	}
}

// resetLocked points the timer at the earliest remembered time.
func (w *waker) resetLocked() {
	if w.timer != nil {
		w.timer.Stop()
		w.timer = nil
	}
	if len(w.times) > 0 {
		w.timer = time.AfterFunc(time.Until(w.times[0]), w.fire)
	}
}

// fire signals for every remembered time that has come.
func (w *waker) fire() {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := time.Now()
	n := 0
	for n < len(w.times) && !now.Before(w.times[n]) {
		n++
	}
	if n == 0 {
		return // a timer replaced by resetLocked after it had fired
	}
	w.times = slices.Delete(w.times, 0, n)
	w.signalLocked()
	w.resetLocked()
}

// Wait implements driver.Waiter within one process: it returns nil at once
// when one of queues (not paused) has a ready job, else when a job pushed
// or released through this Queue value may have become ready (a Push or
// PushMany, a retry or snooze through Complete, RetryDead or Resume; a job
// pushed or released for later wakes it when that time comes), or after max. A push
// from another process, or through Tx (visible only at its commit), is
// seen at the next call after max: keep the Worker's Poll as the bound on
// that delay. ctx's error when ctx is done. A wake-up may be spurious.
//
// sqlqueue/postgres replaces this method with one that also hears other
// processes' pushes (LISTEN/NOTIFY).
func (q *Queue) Wait(ctx context.Context, queues []string, max time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	// Subscribe before looking, so a push between the look and the wait
	// is not missed.
	woken := q.wake.wait()
	ready, err := q.hasReady(ctx, queues)
	if err != nil {
		return q.wrap(ctx, err, "looking for ready jobs")
	}
	if ready {
		return nil
	}
	// An idle worker beats its heartbeat (and so Maintain) only every
	// heartbeat interval; its Waits keep retention to the maintenance
	// interval when that is shorter.
	q.maintainInBackground()
	t := time.NewTimer(max)
	defer t.Stop()
	select {
	case <-woken:
		return nil
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// hasReady reports whether one of queues that is not paused has a ready
// job.
func (q *Queue) hasReady(ctx context.Context, queues []string) (bool, error) {
	if err := q.use(ctx); err != nil {
		return false, err
	}
	if len(queues) == 0 {
		queues = []string{queue.DefaultQueue}
	}
	return q.anyReady(ctx, stmts(q.db), queues, micros(time.Now()))
}

// anyReady reports whether one of queues that is not paused has a job
// ready at now: one probe per priority, highest first (byPriority), each
// ending at the first due job or at the last due entry of its priority
// in the claim index, so jobs scheduled ahead are not read.
func (q *Queue) anyReady(ctx context.Context, st statements, queues []string, now int64) (bool, error) {
	var ready bool
	err := q.byPriority(ctx, st, queues, func(prio int64, below bool) (bool, error) {
		stmt := qHasReady
		if below {
			stmt = qHasReadyBelow
		}
		var one int
		err := queryRow(ctx, st, q.stmtN(stmt, len(queues)), append(queueArgs(queues), prio, now, now), &one)
		if errors.Is(err, sql.ErrNoRows) {
			return false, nil
		}
		ready = err == nil
		return ready, err
	})
	return ready, err
}

// query names one whole statement of the dialect seam: an operation whose
// SQL is fixed but for its bind parameters. Each dialect writes its own
// text of every query in its files (dialect_<name>*.go) as a template that
// names the queue's tables in braces ({jobs}, {counts}, ...) and marks its
// parameters with ?; New renders the templates once per Queue (see
// render), and shared code runs them by name (Queue.stmt), never building
// SQL text of its own. Statements whose shape depends on the call (lists,
// searches, bulk selections, the claim and the batched acks) are built by
// the dialect's operations instead.
type query int

// The named statements. Each comment says what the statement does and
// what it takes, in order; the dialects' texts must agree with it.
const (
	// qSchemaVersion reads the recorded schema version from {meta}.
	qSchemaVersion query = iota
	// qCounts reads the counts table summed by queue and state (queue,
	// state, sum), non-zero sums only, sorted by queue then state.
	qCounts
	// qKnownQueues lists the queues whose count in state (the argument)
	// is positive, sorted, at most maxStatsQueues.
	qKnownQueues
	// qFinishedQueues lists (queue, count) of the queues with a positive
	// count in state (the argument), sorted by queue.
	qFinishedQueues
	// qScheduledCounts reads the counts of the scheduled buckets (queue,
	// bucket state, sum), non-zero sums only.
	qScheduledCounts
	// qPruneScheduledCounts deletes the bucket rows of shard 0 left at
	// zero and every row of the buckets before the argument (a bucket
	// number, run_at / schedBucket). The bucket number is read inside a
	// CASE on the "at:" prefix: a database may test the cast before the
	// LIKE beside it, and other states' text is no number.
	qPruneScheduledCounts
	// qPaused lists the paused queues; qPausedSorted sorted by name.
	qPaused
	qPausedSorted
	// qPause pauses a queue (queue, paused_at) unless it is paused.
	qPause
	// qResume unpauses a queue (queue).
	qResume
	// qStatsMetrics sums the metrics rows by queue since a minute (the
	// rate window's start, then the stats window's start): queue,
	// processed, failed, runtime total, runtime max, wait total, and the
	// processed jobs since the rate window's start.
	qStatsMetrics
	// qMetrics reads the metrics rows since a minute, oldest first, at
	// most 100,000 (the column names are StructScan's).
	qMetrics
	// qMetricsUpsert adds to one metrics row (queue, minute, processed,
	// failed, runtime total, runtime max, wait total), keeping the larger
	// maximum.
	qMetricsUpsert
	// qPruneMetrics deletes the metrics rows before a minute.
	qPruneMetrics
	// qWorkerUpsert creates or refreshes one worker row (id, host, pid,
	// queues, concurrency, started_at, last_seen, running, reserved,
	// max_attempts).
	qWorkerUpsert
	// qWorkerDelete deletes one worker row (id).
	qWorkerDelete
	// qWorkers lists the worker rows seen since a time, by id, at most
	// 1000 (the column names are StructScan's).
	qWorkers
	// qWorkersHeld reads (running, reserved) of the worker rows seen
	// since a time that hold jobs, at most maxHeldWorkers.
	qWorkersHeld
	// qPruneWorkers deletes the worker rows last seen before a time.
	qPruneWorkers
	// qFleetTerminateAll adds one to the fleet's terminations (now).
	qFleetTerminateAll
	// qFleetTerminate tells one worker to terminate (target, now).
	qFleetTerminate
	// qFleetPause pauses a target, '*' or a worker (target, now).
	qFleetPause
	// qFleetContinue ends the pause of one target (now, target).
	qFleetContinue
	// qFleetContinueAll ends every pause (now).
	qFleetContinueAll
	// qFleetOrders reads (target, paused, terminations) of the fleet and
	// one worker (worker id).
	qFleetOrders
	// qFleetPaused lists the paused workers' targets, sorted, at most
	// 1000.
	qFleetPaused
	// qFleetDelete deletes one worker's commands (target).
	qFleetDelete
	// qPruneFleet deletes the commands of workers that are not in the
	// registry, last changed before a time.
	qPruneFleet
	// qGetJob reads one job (id): jobCols then attemptCols.
	qGetJob
	// qJobsByID reads the jobs of an ID list (one IN list): jobCols.
	qJobsByID
	// qPriorities lists the distinct priorities of one queue's pending
	// jobs (queue, queue), highest first, at most maxPriorities+1. A
	// dialect that steps the scan itself leaves it empty.
	qPriorities
	// qUniquesHeld reads (queue, unique_key) of the holds of a key list
	// (one IN list) that end after a time.
	qUniquesHeld
	// qUniqueDeleteEnded deletes one ended hold (queue, key, now).
	qUniqueDeleteEnded
	// qUniqueTake takes a hold (queue, key, expires_at) unless one exists.
	qUniqueTake
	// qUniqueRelease gives one hold back (queue, key, expires_at).
	qUniqueRelease
	// qPruneUniques deletes the holds that ended before a time.
	qPruneUniques
	// qFinishedBatches lists up to 100 IDs of batches finished before a
	// time, oldest first.
	qFinishedBatches
	// qDeleteBatchMembers and qDeleteBatches delete the member rows and
	// the rows of a list of batches (one IN list).
	qDeleteBatchMembers
	qDeleteBatches
	// qDeadLetters lists dead letters (limit), newest failure first;
	// qDeadLettersOf those of one queue (queue, limit).
	qDeadLetters
	qDeadLettersOf
	// qLen counts the pending jobs; qLenOf those of one queue (queue).
	qLen
	qLenOf
	// qPendingMembers lists the waiting jobs that are pending members of a
	// batch; qPendingMembersOf those of one queue (queue).
	qPendingMembers
	qPendingMembersOf
	// qPendingNodes lists the waiting jobs that are pending nodes of a
	// graph that runs; qPendingNodesOf those of one queue (queue).
	qPendingNodes
	qPendingNodesOf
	// qFoldCounts moves the counts of the shards no open transaction
	// holds into shard 0, in one statement (PostgreSQL). qFoldShards
	// reads and locks those shards (queue, state, shard, n) and qFoldAdd
	// adds to shard 0 (queue, state, n), where folding takes a
	// transaction (MySQL). SQLite writes shard 0 only and has none.
	qFoldCounts
	qFoldShards
	qFoldAdd
	// The statements of batches (batch.go): each does what its name and
	// its text say, the same on every dialect.
	qBatchInsert
	qBatchAddTotal
	qBatchTouch
	qBatchEnds
	qBatchRules
	qBatchAddCounters
	qBatchCancel
	qBatchCatch
	qBatchThen
	qBatchFinally
	qBatchCallbacks
	qBatchByID
	qBatches
	qBatchesAfter
	qMemberSetState
	qMembersCancel
	qMemberCancel
	qMembersCancelled
	qMembers
	qMembersInState
	// The statements of the lease rows in {meta} and of periodic jobs'
	// ticks (control.go), as their texts say.
	qLeaseRowInsert
	qLeaseAcquire
	qLeaseRelease
	qPeriodicInsert
	qPeriodicUpdate
	qPeriodicLastTick
	qPeriodicTick
	qPeriodicClearJob
	qPeriodicList
	qPeriodicPause
	qPeriodicExists
	// The statements of monitored tags (tags.go): qTagMonitor adds a tag
	// (tag, since) while fewer than a bound (the bound) are monitored,
	// changing nothing for a monitored one; qTagExists counts a tag's rows
	// (tag); qTagUnmonitor and qTagDropJobs delete a tag and its records
	// (tag); qTagList lists the tags, sorted; qTagRecord adds or replaces
	// a record (tag, list, id, queue, name, state, at, attempts, error)
	// when its tag is monitored (tag); qTagCutoff reads the (at, id) of a
	// list's record at an offset from its newest (tag, list, offset), and
	// qTagTrim deletes that record and the older ones (tag, list, at, at,
	// id); qTagJobs reads a list, newest first (tag, list, limit).
	qTagMonitor
	qTagExists
	qTagUnmonitor
	qTagDropJobs
	qTagList
	qTagRecord
	qTagCutoff
	qTagTrim
	qTagJobs
	// The statements of results (result.go): qResultPut stores or
	// replaces a job's result (id, result, expires); qResultGet reads one
	// that has not expired (id, now); qPruneResults deletes the expired
	// (now).
	qResultPut
	qResultGet
	qPruneResults
	// qJob reads one job (id): jobCols.
	qJob
	// qJobState reads one job's state (id); qPendingByKey the ID of the
	// pending job of a queue holding a unique key (queue, key);
	// qNotPendingOfIDs the IDs of an ID list (one IN list) whose jobs are
	// finished or dead.
	qJobState
	qPendingByKey
	qNotPendingOfIDs
	// qGroupMark moves the pending jobs of an ID list (one IN list) to
	// the grouped state: the group members of a push, in its transaction.
	qGroupMark
	// qGroupedOf reads the grouped rows (jobCols) of a list of queues (one
	// IN list) and a name, oldest first, locked against other gathers.
	qGroupedOf
	// qGroupedSeqs reads, without a lock, the queue and seq of the
	// grouped rows of a list of queues (one IN list) and a name up to a
	// seq: what a gather's locked read may have passed over.
	qGroupedSeqs
	// qHasReady finds a ready job (1) of one priority of a list of queues
	// that are not paused (queues, priority, now, now), and qHasReadyBelow
	// one of any priority up to a bound (queues, bound, now, now): the
	// steps of hasReady (see byPriority).
	qHasReady
	qHasReadyBelow

	// The writes of the jobs table (in each dialect_<d>.go). "The
	// lease" is three parameters: the job's ID, the lease token and now;
	// the statement changes the job only while that lease is current
	// (pending under the token, not expired). Statements with a list
	// mark take a list of n (see stmtN).

	// qClaim leases up to a limit of ready jobs in one statement
	// (PostgreSQL): (queues twice for the loose scan of priorities,
	// queues, now, now, queues again for the pause check, limit, limit,
	// attempts to add, token, lease expiry, now, now, worker), returning
	// pgClaimCols.
	qClaim
	// qClaimSelectFrom is qClaimSelect from a cursor on (see
	// claimCursors): after the priority, now and now, the cursor's
	// run_at, run_at again and seq; qClaimSelectTo reads up to the cursor
	// (after the priority, the lesser of now and the cursor's run_at, now,
	// the cursor's run_at and seq). MySQL/MariaDB only: a dialect without
	// them claims from the start (selectThenClaim).
	qClaimSelectFrom
	qClaimSelectTo
	// qClaimFrom is qClaim starting each priority's read after a cursor
	// (PostgreSQL; see claimCursors): its arguments are qClaim's with the
	// cursor's priority, run_at, priority again and seq after the two
	// nows.
	qClaimFrom
	// qClaimTop reads the highest priority of one queue's pending jobs
	// (queue), qClaimNext the highest below a priority (queue, priority):
	// the loose scan of the claim index that byPriority steps.
	qClaimTop
	qClaimNext
	// qClaimSelect reads the ready jobs of one priority a claim takes
	// (queues, priority, now, now, limit; jobCols), and qClaimSelectBelow
	// those of every priority up to a bound (queues, bound, now, now,
	// limit), locking them where the dialect locks rows; qClaimUpdate
	// leases them by the key the dialect finds rows by (attempts to add,
	// token, lease expiry, now, now, worker, keys): the claim of MySQL
	// and SQLite, in one write transaction.
	qClaimSelect
	qClaimSelectBelow
	qClaimUpdate

	// The lease-guarded changes of one job, each (its arguments, then the
	// lease): qAckDelete deletes it (); qAckDone marks it done (now, now);
	// qRetryLeased releases it for another attempt, appending the attempt
	// to its history (now, the history's error, run at, run at, reason,
	// now); qDeadLeased dead-letters it likewise (now, the history's
	// error, reason, now, now, the attempt limit or 0 to keep its own); qCancelLeased cancels it (error, now,
	// now); qSnoozeLeased puts it back giving its attempt back (snoozes
	// to add, run at, run at, now).
	qAckDelete
	qAckDone
	qRetryLeased
	qDeadLeased
	qCancelLeased
	qSnoozeLeased

	// The lease-guarded changes of many jobs (finishLeases), each taking
	// its arguments, then the leases as its dialect takes them, then now:
	// qStartLeases counts an attempt and dates its start (now, now);
	// qAckLeases deletes the jobs (); qDoneLeases marks them done (now,
	// now); qExtendLeases moves their lease expiry (expiry, now). Each
	// returns the (id, lease_token) of the jobs it changed, except on
	// MySQL, whose changes return no rows.
	qStartLeases
	qAckLeases
	qDoneLeases
	qExtendLeases
	// qStartAckLeases and qStartDoneLeases are qStartLeases and
	// qAckLeases (qDoneLeases) in one statement, returning (part, id,
	// lease_token), the part 0 or 1 (PostgreSQL).
	qStartAckLeases
	qStartDoneLeases
	// The same changes matching each (id, token) pair in SQL, where the
	// statements above match tokens alone (SQLite: the leases as two
	// text-array literals, see pgArray).
	qStartLeasesPairs
	qAckLeasesPairs
	qDoneLeasesPairs
	qExtendLeasesPairs
	// The same changes by primary key (their arguments, then the IDs),
	// once qLockLeases has locked and read the rows still under their
	// leases (ids, (id, token) pairs, now), and qAckLeasesReturning, a
	// deletion returning the (id, lease_token) of the rows it deleted, by
	// ID and token lists (ids, tokens, now): MySQL and MariaDB.
	qStartByID
	qAckByID
	qDoneByID
	qExtendByID
	qLockLeases
	qAckLeasesReturning
	// qSubtractCounts adds n (negative) to this connection's counter rows
	// of n (queue, state) pairs (queue, state, n each): the jobs
	// qAckLeasesReturning deleted (MariaDB).
	qSubtractCounts

	// qInsertJobs inserts n jobs (insertParams each: see insertArgs),
	// skipping those whose ID or unique key is taken, returning the IDs
	// it inserted where the dialect can; qInsertJobsNotify does the same
	// and returns a NULL row when it inserted any, having notified the
	// listeners (channel, payload after the rows: PostgreSQL); qNotify
	// notifies them (channel, payload). qInsertJob inserts one job,
	// failing on a taken key (insertArgs, its created_at given).
	qInsertJobs
	qInsertJobsNotify
	qNotify
	qInsertJob
	// qInsertJobsHeld, qInsertJobsHeldNotify and qInsertJobHeld are
	// qInsertJobs, qInsertJobsNotify and qInsertJob for jobs that name
	// UniqueStates: heldParams per job, unique_hold last (see insertArgs).
	qInsertJobsHeld
	qInsertJobsHeldNotify
	qInsertJobHeld
	// qJobsInserted lists the IDs of an ID list (one IN list) present;
	// qJobsInsertedSince those whose seq is at least a value (MySQL).
	qJobsInserted
	qJobsInsertedSince
	// qRevive moves a finished or dead job back to pending in place, after
	// the last insertion, unless its queue holds its unique key pending
	// (queue, name, payload, priority, max attempts, timeout, unique key,
	// tags, meta, available at, run at, now, keep created (1/0), created
	// at, retry until, id, queue, unique key). MySQL revives by
	// qReviveLock (id: created_at, state), qDeleteJob (id) and qInsertJob.
	qRevive
	// qReviveHeld is qRevive for a job that names UniqueStates: it also
	// writes unique_hold, and is skipped while another job of the queue
	// holds the key in a finished state it names (qRevive's arguments
	// with the unique_hold before the id, and the id again last).
	qReviveHeld
	qReviveLock
	qDeleteJob
	// qReplaceWaiting deletes the waiting job holding a unique key (queue,
	// key, the pushed job's id): a Replace push.
	qReplaceWaiting

	// qRetryDead moves a dead letter back to pending with its attempts
	// reset (now, now, now, id); qRetryDeadIn those of an ID list (now,
	// now, now, ids). qForgetDead deletes a dead letter (id);
	// qForgetDeadIn those of an ID list (ids). qCancelJob cancels a
	// pending job (now, now, error, id); qCancelJobsIn those of an ID
	// list (now, now, error, ids). qDeleteWaitingIn deletes the waiting
	// jobs of an ID list (ids); qDeleteInState the jobs of an ID list in
	// a state (ids, state).
	qRetryDead
	qRetryDeadIn
	// qRetryDeadInNoted is qRetryDeadIn appending an action to each
	// job's history (now, now, now, action at, by, what, ids): a bulk
	// retry that records who did it.
	qRetryDeadInNoted
	// qAmendRetry (Amend) moves a finished job back to pending under its
	// ID, attempts reset, payload set, the action appended to its history
	// (action at, by, what, payload, now, now, now, id, state it is in).
	// qAmendRunNow makes a scheduled job available now, the action
	// appended (action at, by, what, now, now, now, id, now).
	// qAmendNote only appends the action (at, by, what, id).
	qAmendRetry
	qAmendRunNow
	qAmendNote
	qForgetDead
	qForgetDeadIn
	qCancelJob
	qCancelJobsIn
	qDeleteWaitingIn
	qDeleteInState
	// qDeadIDs, qDeadIDsOf (queue), qWaitingIDs and qWaitingIDsOf (queue)
	// list up to pruneBatch IDs of dead letters and of waiting jobs.
	qDeadIDs
	qDeadIDsOf
	qWaitingIDs
	qWaitingIDsOf
	// The statements of graphs (graph.go): each does what its name and
	// its text say, the same on every dialect. qGraphNodesInsert and
	// qGraphEdgesInsert are list statements (n rows).
	qGraphInsert
	qGraphNodesInsert
	qGraphEdgesInsert
	qGraphByID
	qGraphs
	qGraphsAfter
	qGraphCounts
	qGraphNodes
	qGraphNodeByName
	qGraphEdges
	qGraphCancelMark
	qGraphCancelWaiting
	qGraphPendingJobs
	qNodeMove
	qNodeSeq
	qNodeDependants
	qNodeSatisfy
	qNodeReadyJob
	qNodeSet
	qNodeCancelWaiting
	qNodeJob
	// The statements of graphs' ends and kept results (graph.go,
	// result.go), the same on every dialect: qGraphsEnded lists up to 100
	// graphs marked running that have no waiting or pending node;
	// qGraphEnd marks one finished (finished_at, id) unless it is so
	// already; qGraphOpenNode finds a waiting or pending node of one (id);
	// qGraphReopen marks one running again (id); qFinishedGraphs lists up
	// to 100 graphs finished before a time, oldest first;
	// qDeleteGraphEdges, qDeleteGraphNodes and qDeleteGraphs delete the
	// rows of a list of graphs (one IN list). qResultPin stores a result
	// kept while its graph or batch runs (id, result, pinnedUntil, keep);
	// qResultsReleaseGraph and qResultsReleaseBatch date the pinned
	// results of a graph's nodes or a batch's members (now, pinnedUntil,
	// id); qResultsRepinGraph pins again the results of a graph's done
	// nodes (pinnedUntil, id).
	qGraphsEnded
	qGraphEnd
	qGraphOpenNode
	qGraphReopen
	qFinishedGraphs
	qDeleteGraphEdges
	qDeleteGraphNodes
	qDeleteGraphs
	qResultPin
	qResultsReleaseGraph
	qResultsReleaseBatch
	qResultsRepinGraph
	// The statements of sequences (sequence.go). qSeqTake creates a
	// sequence's row naming a head, or finds and (where the dialect
	// locks rows) locks the row that exists (queue, key, head); qSeqHead
	// reads its head, locked (queue, key). qSeqWait moves a pushed member
	// to 'sequenced' (id) and qSeqJoin appends it to the waiting rows
	// (queue, key, id). qSeqNext reads the first waiting row (queue, key:
	// pos, job ID), locked; qSeqDropPos deletes one (pos); qSeqWake moves
	// a waiting member to pending (id); qSeqSetHead names a new head
	// (head, queue, key); qSeqDelete deletes a sequence's row (queue,
	// key). qSeqHeadsOf reads, locked, the sequences headed by the jobs of
	// an ID list (one IN list: queue, key, head), qSeqHeadsGone those
	// whose head is no longer pending or dead; qSeqDropGone deletes the
	// waiting rows of an ID list whose jobs are no longer waiting.
	// qSeqHeld and qSeqHeldOf (queue) list the sequences headed by a dead
	// letter, most recently dead first (limit: queue, key, head, waiting).
	qSeqTake
	qSeqHead
	qSeqWait
	qSeqJoin
	qSeqNext
	qSeqDropPos
	qSeqWake
	qSeqSetHead
	qSeqDelete
	qSeqHeadsOf
	qSeqHeadsGone
	qSeqDropGone
	qSeqHeld
	qSeqHeldOf
	// qLeaseEpoch reads a lease row's epoch (name); qLeaseEpochLocked
	// also locks the row until the write transaction ends.
	qLeaseEpoch
	qLeaseEpochLocked
	// qInsertMembers adds n pending members to a batch (n batch_id,
	// job_id pairs), skipping those already in it.
	qInsertMembers
	// qChangedRowsProbe changes no row of {meta}: the rows it reports
	// affected tell whether the connection counts matched rows or changed
	// ones (MySQL). qFoldDelete deletes n count shards ((queue, state,
	// shard) triples: MySQL's foldCounts).
	qChangedRowsProbe
	qFoldDelete
	// qVacuumDue reads whether the jobs table is due a vacuum and an
	// analyze (minimum dead rows, seconds since the last analyze, the
	// table's name); qVacuum and qVacuumAnalyze vacuum it (PostgreSQL).
	qVacuumDue
	qVacuum
	qVacuumAnalyze

	numQueries
)

// queryTemplates is a dialect's text of some of the named statements.
type queryTemplates map[query]string

// renderedQueries is one Queue's statements: the dialect's templates
// with the table names in place, as run (placeholders rebound) and, for
// statements with an IN list that sqlx.In expands per call, with ?
// placeholders. A template with a list mark ({list ...}: see
// expandLists) is kept in in only, with its ? placeholders: its text
// depends on the count of its list (stmtN).
type renderedQueries struct {
	run   [numQueries]string
	in    [numQueries]string
	lists sync.Map // listKey -> the statement as run
}

// listKey names one expansion of a statement with list marks.
type listKey struct {
	id query
	n  int
}

// render puts the table names of t into each of a dialect's templates
// and rebinds their placeholders. A template naming a table the Queue
// has not got is a bug, reported by the tests of every dialect.
func render(d dialect, t tableNames, sets ...queryTemplates) *renderedQueries {
	r := &renderedQueries{}
	for _, set := range sets {
		for id, tmpl := range set {
			text := t.replacer.Replace(tmpl)
			r.in[id] = text
			if !strings.Contains(text, listMark) {
				r.run[id] = d.rebind(text)
			}
		}
	}
	return r
}

// listMark opens a list mark in a template: "{list G}" stands for n
// copies of G separated by ", ", n being the count the statement is run
// with (stmtN). G holds no brace: "IN ({list ?})" is an IN list of n
// parameters, "VALUES {list (?, ?, 'pending')}" n rows.
const listMark = "{list "

// expandLists replaces every list mark of text with n copies of its
// group.
func expandLists(text string, n int) string {
	var b strings.Builder
	for {
		i := strings.Index(text, listMark)
		if i < 0 {
			b.WriteString(text)
			return b.String()
		}
		end := strings.IndexByte(text[i:], '}')
		if end < 0 {
			panic("sqlqueue: unclosed list mark in " + text)
		}
		group := text[i+len(listMark) : i+end]
		b.WriteString(text[:i])
		for k := range n {
			if k > 0 {
				b.WriteString(", ")
			}
			b.WriteString(group)
		}
		text = text[i+end+1:]
	}
}

// stmt returns the text of the named statement, as run.
func (q *Queue) stmt(id query) string {
	s := q.qs.run[id]
	if s == "" {
		panic(fmt.Sprintf("sqlqueue: the %s dialect has no statement %d", q.d.name(), id))
	}
	return s
}

// stmtN returns the text of the named statement whose lists (see
// listMark) hold n elements each, as run. Each count's text is built
// once per Queue.
func (q *Queue) stmtN(id query, n int) string {
	k := listKey{id, n}
	if s, ok := q.qs.lists.Load(k); ok {
		return s.(string)
	}
	tmpl := q.qs.in[id]
	if !strings.Contains(tmpl, listMark) {
		panic(fmt.Sprintf("sqlqueue: the %s dialect has no list statement %d", q.d.name(), id))
	}
	s := q.d.rebind(expandLists(tmpl, n))
	q.qs.lists.Store(k, s)
	return s
}

// stmtIn returns the named statement with its IN list expanded for args
// (one slice argument) by sqlx.In, and the flattened arguments.
func (q *Queue) stmtIn(id query, args ...any) (string, []any, error) {
	if q.qs.in[id] == "" {
		panic(fmt.Sprintf("sqlqueue: the %s dialect has no statement %d", q.d.name(), id))
	}
	text, args, err := sqlx.In(q.qs.in[id], args...)
	if err != nil {
		return "", nil, err
	}
	return q.d.rebind(text), args, nil
}

// unrendered reports the named statements a dialect's templates leave
// out or that still hold a brace after rendering, for the tests.
func unrendered(r *renderedQueries, optional ...query) []string {
	var bad []string
	for id := range numQueries {
		s := expandLists(r.in[id], 1)
		switch {
		case s == "" && !slices.Contains(optional, id):
			bad = append(bad, fmt.Sprintf("%d missing", id))
		case strings.Contains(s, "{"):
			bad = append(bad, fmt.Sprintf("%d: %s", id, s))
		}
	}
	return bad
}

// Bounds of the inspection statements, as SQL literals.
var (
	maxStatsQueuesLit = strconv.Itoa(maxStatsQueues)
	maxHeldWorkersLit = strconv.Itoa(maxHeldWorkers)
	maxPrioritiesLit  = strconv.Itoa(maxPriorities + 1)
	pruneBatchLit     = strconv.Itoa(pruneBatch)
)
