package bench

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/sqlqueue"
	"github.com/meridianjobs/meridian/sqlqueue/mysql"
	"github.com/meridianjobs/meridian/sqlqueue/postgres"
	"github.com/meridianjobs/meridian/sqlqueue/sqlite"
)

// tablePrefix starts the name of every table the harness creates.
const tablePrefix = "meridian_bench_"

// SQL is a sqlqueue database as a Target. Make one with Postgres, MySQL or
// SQLite.
type SQL struct {
	name      string // postgres, mysql, sqlite
	sqlDriver string // database/sql driver name, for the baseline
	dsn       string // database/sql DSN (a pgx connection string for postgres)

	// Pool, when positive, sizes each queue's connection pool instead of
	// the registration package's default: pool_max_conns for PostgreSQL
	// (whose pgxpool keeps idle connections), and for MySQL an *sql.DB of
	// the harness's own with that many open and idle connections (the
	// mysql package's Open leaves database/sql's defaults: two idle). It
	// does not apply to SQLite, where sqlqueue uses one connection.
	Pool int

	// KeepDone keeps acked jobs in the done state (sqlqueue.WithRetention
	// of a day, longer than any run) instead of deleting them when they
	// are acked, Meridian's default: the work River and the other peers
	// do at their defaults, which keep completed jobs.
	KeepDone bool

	// SearchIndex creates the payload search index of each queue's
	// tables (sqlqueue.Queue.EnableSearchIndex) before it is measured:
	// what the index costs on every write.
	SearchIndex bool

	// PushLanes, when set, is sqlqueue.WithPushLanes of each queue: how
	// many single Dispatches run on their own at once before the others
	// wait and go together (0: every Dispatch alone). Nil keeps the
	// dialect's default.
	PushLanes *int

	rootOnce sync.Once
	rootPID  int // the server's main process (ServerCPU), 0 if unknown
}

// Postgres is the PostgreSQL database dsn (a postgres:// URL or a pgx
// key=value connection string) as a Target. Its queues are what
// sqlqueue/postgres.Open returns: pgxpool, LISTEN/NOTIFY wake-ups, COPY.
func Postgres(dsn string) *SQL {
	return &SQL{name: "postgres", sqlDriver: "pgx", dsn: dsn}
}

// MySQL is the MySQL or MariaDB database dsn (go-sql-driver/mysql form,
// user@tcp(host:port)/db) as a Target. Its queues are what
// sqlqueue/mysql.Open returns.
func MySQL(dsn string) *SQL {
	return &SQL{name: "mysql", sqlDriver: "mysql", dsn: dsn}
}

// SQLite is the SQLite database file at path as a Target. The file is
// created when missing; the harness's tables are dropped from it after
// each mode, the file itself is left. Its queues are what
// sqlqueue/sqlite.Open returns.
func SQLite(path string) *SQL {
	return &SQL{name: "sqlite", sqlDriver: "sqlite", dsn: path}
}

// Name returns postgres, mysql or sqlite.
func (s *SQL) Name() string { return s.name }

// open opens s's database for the baseline with a pool of n connections,
// every one kept idle rather than closed between uses.
func (s *SQL) open(ctx context.Context, n int) (*sql.DB, error) {
	db, err := sql.Open(s.sqlDriver, s.dsn)
	if err != nil {
		return nil, fmt.Errorf("opening %s database: %w", s.name, err)
	}
	db.SetMaxOpenConns(n)
	db.SetMaxIdleConns(n)
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("connecting to %s database: %w", s.name, err)
	}
	return db, nil
}

// warmPool opens n connections of db at once and returns them to its idle
// pool, so that later use does not pay for connecting.
func warmPool(ctx context.Context, db *sql.DB, n int) error {
	cs := make([]*sql.Conn, 0, n)
	defer func() {
		for _, c := range cs {
			_ = c.Close()
		}
	}()
	for range n {
		c, err := db.Conn(ctx)
		if err != nil {
			return fmt.Errorf("opening baseline connections: %w", err)
		}
		if err := c.PingContext(ctx); err != nil {
			_ = c.Close()
			return fmt.Errorf("opening baseline connections: %w", err)
		}
		cs = append(cs, c)
	}
	return nil
}

// uniqueTable returns a new table name under tablePrefix.
func uniqueTable() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return tablePrefix + hex.EncodeToString(b[:])
}

// sqlQueue is what the registration packages' Open functions return.
type sqlQueue interface {
	queue.Queue
	DropTables(ctx context.Context) error
	EnableSearchIndex(ctx context.Context) error
	Close() error
}

// NewQueue opens a queue, as its registration package's Open does, in
// tables named for a new unique prefix (Open runs Setup), and returns it
// with a function that drops those tables and closes it.
func (s *SQL) NewQueue(ctx context.Context) (queue.Queue, func(context.Context) error, error) {
	table := uniqueTable()
	var (
		q    sqlQueue
		err  error
		opts = s.options(table)
	)
	switch {
	case s.name == "postgres":
		dsn := s.dsn
		if s.Pool > 0 {
			dsn, err = withPoolMaxConns(dsn, s.Pool)
			if err != nil {
				return nil, nil, err
			}
		}
		q, err = postgres.Open(ctx, dsn, opts...)
	case s.name == "mysql" && s.Pool > 0:
		q, err = s.ownPool(ctx, table)
	case s.name == "mysql":
		q, err = mysql.Open(ctx, s.dsn, opts...)
	default:
		q, err = sqlite.Open(ctx, s.dsn, opts...)
	}
	if err != nil {
		// Open drops nothing when Setup fails half way; sweep with a
		// queue that has not been set up.
		return nil, nil, errors.Join(fmt.Errorf("opening a %s queue in tables %s: %w", s.name, table, err), s.sweep(ctx, table))
	}
	drop := func(ctx context.Context) error {
		return errors.Join(q.DropTables(ctx), q.Close())
	}
	if s.SearchIndex {
		if err := q.EnableSearchIndex(ctx); err != nil {
			return nil, nil, errors.Join(fmt.Errorf("enabling the search index of %s: %w", table, err), drop(ctx))
		}
	}
	return q, drop, nil
}

// NewQueueEngine is NewQueue as an Engine (QueueEngine), the form the peer
// comparisons under internal/bench measure.
func (s *SQL) NewQueueEngine(ctx context.Context) (Engine, func(context.Context) error, error) {
	q, drop, err := s.NewQueue(ctx)
	if err != nil {
		return nil, nil, err
	}
	return QueueEngine(q), drop, nil
}

// options are the sqlqueue options of a queue in tables named table.
func (s *SQL) options(table string) []sqlqueue.Option {
	opts := []sqlqueue.Option{sqlqueue.WithTable(table)}
	if s.KeepDone {
		opts = append(opts, sqlqueue.WithRetention(24*time.Hour, 7*24*time.Hour))
	}
	if s.PushLanes != nil {
		opts = append(opts, sqlqueue.WithPushLanes(*s.PushLanes))
	}
	return opts
}

// ownPool is a MySQL queue over an *sql.DB of the harness's own, sized
// by s.Pool; closing the queue closes it.
func (s *SQL) ownPool(ctx context.Context, table string) (sqlQueue, error) {
	db, err := s.open(ctx, s.Pool)
	if err != nil {
		return nil, err
	}
	q, err := sqlqueue.New(db, s.options(table)...)
	if err == nil {
		err = q.Setup(ctx)
	}
	if err != nil {
		return nil, errors.Join(err, db.Close())
	}
	return ownedDB{q, db}, nil
}

// ownedDB is a queue whose Close also closes the database it runs on.
type ownedDB struct {
	*sqlqueue.Queue
	db *sql.DB
}

func (o ownedDB) Close() error { return errors.Join(o.Queue.Close(), o.db.Close()) }

// sweep drops the tables of table, whatever state they are in.
func (s *SQL) sweep(ctx context.Context, table string) error {
	db, err := s.open(ctx, 1)
	if err != nil {
		return err
	}
	defer db.Close()
	q, err := sqlqueue.New(db, sqlqueue.WithTable(table))
	if err != nil {
		return err
	}
	return q.DropTables(ctx)
}

// withPoolMaxConns sets pool_max_conns in a pgx connection string, a URL
// or key=value pairs.
func withPoolMaxConns(dsn string, n int) (string, error) {
	if u, err := url.Parse(dsn); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		v := u.Query()
		v.Set("pool_max_conns", strconv.Itoa(n))
		u.RawQuery = v.Encode()
		return u.String(), nil
	}
	if strings.Contains(dsn, "pool_max_conns") {
		return "", fmt.Errorf("the PostgreSQL DSN sets pool_max_conns already; drop it or --pool")
	}
	return strings.TrimSpace(dsn + " pool_max_conns=" + strconv.Itoa(n)), nil
}

// onTable opens a connection of its own to q's database (on SQLite with a
// long busy timeout, as the queue's own connection writes meanwhile) and
// returns it with q's jobs table's name. The caller closes db.
func (s *SQL) onTable(ctx context.Context, q queue.Queue) (table string, db *sql.DB, err error) {
	t, ok := unwrap(q).(interface{ Table() string })
	if !ok {
		return "", nil, fmt.Errorf("bench: a %T does not name its table", unwrap(q))
	}
	db, err = s.open(ctx, 1)
	if err != nil {
		return "", nil, err
	}
	if s.name == "sqlite" {
		if _, err := db.ExecContext(ctx, "PRAGMA busy_timeout=30000"); err != nil {
			db.Close()
			return "", nil, err
		}
	}
	return t.Table(), db, nil
}

// Analyze runs ANALYZE on q's jobs table, on a connection of its own.
func (s *SQL) Analyze(ctx context.Context, q queue.Queue) error {
	table, db, err := s.onTable(ctx, q)
	if err != nil {
		return err
	}
	defer db.Close()
	stmt := "ANALYZE " + s.quote(table)
	if s.name == "mysql" {
		stmt = "ANALYZE TABLE " + s.quote(table)
	}
	if _, err := db.ExecContext(ctx, stmt); err != nil {
		return fmt.Errorf("%s: %w", stmt, err)
	}
	return nil
}

func (s *SQL) quote(name string) string {
	if s.name == "mysql" {
		return "`" + name + "`"
	}
	return `"` + name + `"`
}

// Baseline measures single-row INSERT transactions per second: conns
// goroutines, each on a connection of its own, insert one row per
// autocommit statement into a plain table (no index, as pgbench's history
// table) for d. On SQLite the goroutines share one connection, as
// sqlqueue's do (SQLite has one writer, and connections that contend for
// it sleep in the busy handler instead of queueing), with sqlqueue's
// settings: WAL and synchronous=NORMAL.
func (s *SQL) Baseline(ctx context.Context, conns int, d time.Duration) (float64, bool, error) {
	pool := conns
	if s.name == "sqlite" {
		pool = 1
	}
	db, err := s.open(ctx, pool)
	if err != nil {
		return 0, false, err
	}
	defer db.Close()
	if s.name == "sqlite" {
		// The settings sqlqueue gives its own connection: the baseline
		// must commit the way the queue does (in WAL with
		// synchronous=NORMAL a commit does not wait for fsync).
		for _, p := range []string{"PRAGMA journal_mode=WAL", "PRAGMA busy_timeout=30000", "PRAGMA synchronous=NORMAL"} {
			if _, err := db.ExecContext(ctx, p); err != nil {
				return 0, false, fmt.Errorf("preparing SQLite connection (%s): %w", p, err)
			}
		}
	}
	table := uniqueTable() + "_baseline"
	create := "CREATE TABLE " + s.quote(table) + " (tid INTEGER NOT NULL, delta INTEGER NOT NULL, mtime BIGINT NOT NULL, filler CHAR(22))"
	if _, err := db.ExecContext(ctx, create); err != nil {
		return 0, false, fmt.Errorf("creating baseline table: %w", err)
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_, _ = db.ExecContext(dctx, "DROP TABLE IF EXISTS "+s.quote(table))
	}()
	insert := "INSERT INTO " + s.quote(table) + " (tid, delta, mtime) VALUES (?, ?, ?)"
	if s.name == "postgres" {
		insert = "INSERT INTO " + s.quote(table) + " (tid, delta, mtime) VALUES ($1, $2, $3)"
	}

	// Open every connection before the clock starts: database/sql opens
	// them lazily, and connection setup (TCP, auth, the driver's
	// handshake) inside the timed window lowered the baseline against
	// pgbench's, which connects before it times.
	if err := warmPool(ctx, db, pool); err != nil {
		return 0, false, err
	}

	var n atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, conns)
	deadline := time.Now().Add(d)
	start := time.Now()
	for g := range conns {
		wg.Go(func() {
			for i := 0; ctx.Err() == nil && time.Now().Before(deadline); i++ {
				if _, err := db.ExecContext(ctx, insert, g, i, time.Now().UnixMicro()); err != nil {
					errs[g] = fmt.Errorf("inserting a baseline row: %w", err)
					return
				}
				n.Add(1)
			}
		})
	}
	wg.Wait()
	el := time.Since(start)
	if err := errors.Join(append(errs, ctx.Err())...); err != nil {
		return 0, false, err
	}
	return float64(n.Load()) / el.Seconds(), true, nil
}

// ServerCPU returns the CPU time the database server this DSN reaches has
// used, when the DSN names this machine: the server's main process and
// its children (PostgreSQL's backends, found through this connection's
// backend), or the one mariadbd process (from @@pid_file). Other servers
// of the same kind on the machine, such as a test's private cluster that
// stops half way, are not counted. SQLite runs inside the client and has
// none.
func (s *SQL) ServerCPU() (time.Duration, bool) {
	if !localDSN(s.dsn) {
		return 0, false
	}
	s.rootOnce.Do(func() { s.rootPID = s.serverPID() })
	if s.rootPID <= 0 {
		return 0, false
	}
	return TreeCPU(s.rootPID)
}

// serverPID returns the process ID of the server's main process, or 0
// when it cannot be found.
func (s *SQL) serverPID() int {
	if s.name != "postgres" && s.name != "mysql" {
		return 0
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	db, err := sql.Open(s.sqlDriver, s.dsn)
	if err != nil {
		return 0
	}
	defer db.Close()
	if s.name == "postgres" {
		var backend int
		if err := db.QueryRowContext(ctx, "SELECT pg_backend_pid()").Scan(&backend); err != nil {
			return 0
		}
		b, err := os.ReadFile("/proc/" + strconv.Itoa(backend) + "/stat")
		if err != nil {
			return 0
		}
		st, err := parseStat(string(b))
		if err != nil {
			return 0
		}
		return st.ppid // the postmaster, which forked the backend
	}
	var pidFile string
	if err := db.QueryRowContext(ctx, "SELECT @@pid_file").Scan(&pidFile); err != nil {
		return 0
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0
	}
	return pid
}

// localDSN reports whether a PostgreSQL or MySQL DSN names a server on
// this machine (loopback, localhost or a Unix socket).
func localDSN(dsn string) bool {
	host := ""
	switch {
	case strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://"):
		u, err := url.Parse(dsn)
		if err != nil {
			return false
		}
		host = u.Hostname()
		if host == "" {
			host = u.Query().Get("host")
		}
	case strings.Contains(dsn, "@tcp("):
		rest := dsn[strings.Index(dsn, "@tcp(")+len("@tcp("):]
		host = rest[:max(strings.IndexAny(rest, ":)"), 0)]
	case strings.Contains(dsn, "@unix("):
		return true
	default: // key=value
		for f := range strings.FieldsSeq(dsn) {
			if v, ok := strings.CutPrefix(f, "host="); ok {
				host = v
			}
		}
	}
	return host == "" || host == "localhost" || strings.HasPrefix(host, "127.") || host == "::1" || strings.HasPrefix(host, "/")
}
