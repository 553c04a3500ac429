package migrate

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/meridianjobs/meridian/queue"
)

//go:embed sql
var files embed.FS

// Dialect is how one SQL flavour runs its migrations. Its statements are
// the only dialect-specific SQL of the runner; each dialect's value lives
// in its own file.
type Dialect struct {
	// Dir is the directory under sql/ that holds the dialect's files.
	Dir string
	// Prepare are run once on the runner's connection before anything
	// else (SQLite's busy timeout).
	Prepare []string
	// Begin opens the transaction each file runs in; empty when DDL is not
	// transactional (the file's statements then run one by one, each
	// committed on its own).
	Begin string
	// WholeRun makes Begin open one transaction for the whole run, every
	// file in it, committed at the end: where that transaction's lock is
	// the migration lock (SQLite), the run holds it throughout.
	WholeRun bool
	// TxLock, when set, is a query run first in each file's transaction
	// with one parameter, the lock key; it blocks until the lock is held
	// and returns 1. The transaction's end releases it.
	TxLock string
	// SessionLock, when set, is a query with one parameter, the lock key,
	// that returns 1 once the connection holds the lock (0 on timeout);
	// SessionUnlock releases it. They bracket the whole run.
	SessionLock, SessionUnlock string
	// TableExists is a query with one parameter (an unquoted table name)
	// that returns a count > 0 when the table exists.
	TableExists string
	// Redundant, when set, reports an error of an ALTER TABLE statement
	// saying its change is made already: a column added twice, or dropped
	// when missing (SQLite and MySQL 8 have no ADD COLUMN IF NOT EXISTS).
	// The runner skips such a statement, so a migration whose run was cut
	// short, or whose version row was reset, runs again to the end.
	Redundant func(error) bool
	// Conflict, when set, reports an error by which the server rolled a
	// file's whole transaction back to break a deadlock (a migration that
	// locks tables meeting the writers of running processes). The runner
	// runs such a file again from the start, up to three times in all.
	// Only for dialects whose files run in a transaction (Begin).
	Conflict func(error) bool

	once       sync.Once
	migrations []Migration
	err        error
}

// Migration is one numbered step of a dialect's schema, as templates.
type Migration struct {
	Version int    // 1, 2, ...: the schema version Up leads to
	Name    string // the file name's words, e.g. "init"
	Up      string // moves the schema from Version-1 to Version
	Down    string // moves it back from Version to Version-1
}

var fileName = regexp.MustCompile(`^([0-9]{4})_([a-z0-9_]+)\.(up|down)\.sql$`)

// Migrations returns the dialect's migrations in order. It fails when the
// files are not numbered 0001, 0002, ... without gaps, each with an up
// and a down file.
func (d *Dialect) Migrations() ([]Migration, error) {
	d.once.Do(func() { d.migrations, d.err = load(d.Dir) })
	return d.migrations, d.err
}

// Latest returns the version the dialect's last migration leads to.
func (d *Dialect) Latest() (int, error) {
	ms, err := d.Migrations()
	return len(ms), err
}

func load(dir string) ([]Migration, error) {
	entries, err := fs.ReadDir(files, path.Join("sql", dir))
	if err != nil {
		return nil, fmt.Errorf("migrate: reading the %s migrations: %w", dir, err)
	}
	var ms []Migration
	for _, e := range entries {
		m := fileName.FindStringSubmatch(e.Name())
		if m == nil {
			return nil, fmt.Errorf("migrate: %s/%s is not named NNNN_name.up.sql or NNNN_name.down.sql", dir, e.Name())
		}
		v, _ := strconv.Atoi(m[1])
		body, err := fs.ReadFile(files, path.Join("sql", dir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("migrate: reading %s/%s: %w", dir, e.Name(), err)
		}
		// ReadDir sorts by name: the up and down files of one version are
		// neighbours (down first), versions in order.
		if len(ms) == 0 || ms[len(ms)-1].Version != v {
			if v != len(ms)+1 {
				return nil, fmt.Errorf("migrate: %s/%s: expected version %04d next", dir, e.Name(), len(ms)+1)
			}
			ms = append(ms, Migration{Version: v, Name: m[2]})
		}
		cur := &ms[len(ms)-1]
		if cur.Name != m[2] {
			return nil, fmt.Errorf("migrate: %s: two names for version %04d (%s, %s)", dir, v, cur.Name, m[2])
		}
		if m[3] == "up" {
			cur.Up = string(body)
		} else {
			cur.Down = string(body)
		}
	}
	for _, m := range ms {
		if strings.TrimSpace(m.Up) == "" || strings.TrimSpace(m.Down) == "" {
			return nil, fmt.Errorf("migrate: %s/%04d_%s lacks its up or down file", dir, m.Version, m.Name)
		}
	}
	return ms, nil
}

// Render replaces each {name} in text by vars[name]. A name in braces that
// vars lacks is an error, so a misspelt table never reaches the database.
// The values must be quoted identifiers made from validated names: they
// are put into the SQL as they are.
func Render(text string, vars map[string]string) (string, error) {
	var b strings.Builder
	b.Grow(len(text) + 256)
	for {
		i := strings.IndexByte(text, '{')
		if i < 0 {
			b.WriteString(text)
			return b.String(), nil
		}
		j := strings.IndexByte(text[i:], '}')
		name := ""
		if j > 0 {
			name = text[i+1 : i+j]
		}
		if !varName.MatchString(name) {
			b.WriteString(text[:i+1])
			text = text[i+1:]
			continue
		}
		v, ok := vars[name]
		if !ok {
			return "", fmt.Errorf("migrate: unknown name {%s}", name)
		}
		b.WriteString(text[:i])
		b.WriteString(v)
		text = text[i+j+1:]
	}
}

var varName = regexp.MustCompile(`^[a-z_]+$`)

// Statements splits a rendered file into its statements: each ends with a
// semicolon at the end of a line. Comment lines before a statement stay
// with it; a part made only of comments is dropped.
func Statements(text string) []string {
	var out []string
	var cur strings.Builder
	flush := func() {
		s := strings.TrimSpace(cur.String())
		cur.Reset()
		for _, line := range strings.Split(s, "\n") {
			if l := strings.TrimSpace(line); l != "" && !strings.HasPrefix(l, "--") {
				out = append(out, strings.TrimSuffix(s, ";"))
				return
			}
		}
	}
	for _, line := range strings.SplitAfter(text, "\n") {
		cur.WriteString(line)
		if strings.HasSuffix(strings.TrimRight(line, " \t\r\n"), ";") {
			flush()
		}
	}
	flush()
	return out
}

// Script returns the statements of the up migrations up to version to
// (all when to <= 0), rendered with vars and joined by ";\n\n".
func (d *Dialect) Script(vars map[string]string, to int) (string, error) {
	ms, err := d.Migrations()
	if err != nil {
		return "", err
	}
	var stmts []string
	for _, m := range ms {
		if to > 0 && m.Version > to {
			break
		}
		text, err := Render(m.Up, vars)
		if err != nil {
			return "", fmt.Errorf("%w (in %04d_%s.up.sql)", err, m.Version, m.Name)
		}
		stmts = append(stmts, Statements(text)...)
	}
	return strings.Join(stmts, ";\n\n") + ";\n", nil
}

// Runner applies one dialect's migrations to one queue's tables.
type Runner struct {
	DB      Conner
	Dialect *Dialect
	// Vars names the tables and indexes for Render; "meta" must be there.
	Vars map[string]string
	// Meta is the unquoted name of the meta table, for TableExists.
	Meta string
	// LockKey names the lock that serialises runners on these tables.
	LockKey string
}

// Conner gives the runner a connection of its own: a *sql.DB.
type Conner interface {
	Conn(ctx context.Context) (*sql.Conn, error)
}

// Querier is what Version reads through: a *sql.DB, *sql.Conn or *sql.Tx.
type Querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// ErrNewer is wrapped by the error of a database whose schema version is
// newer than the dialect's last migration. It matches queue.ErrConfig.
var ErrNewer = fmt.Errorf("%w: schema version newer than this release knows", queue.ErrConfig)

// Version returns the schema version recorded in the meta table: 0 when
// the table or its row does not exist.
func (r *Runner) Version(ctx context.Context, q Querier) (int, error) {
	var n int
	if err := q.QueryRowContext(ctx, r.Dialect.TableExists, r.Meta).Scan(&n); err != nil {
		return 0, fmt.Errorf("checking whether table %s exists: %w", r.Meta, err)
	}
	if n == 0 {
		return 0, nil
	}
	var v string
	err := q.QueryRowContext(ctx, "SELECT value FROM "+r.Vars["meta"]+" WHERE name = 'schema_version'").Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("reading the schema version: %w", err)
	}
	n, err = strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%w: table %s records schema version %q, which is not a number", queue.ErrConfig, r.Meta, v)
	}
	return n, nil
}

// Up applies the migrations after the recorded version up to version to
// (the latest when to <= 0) and returns the versions before and after. A
// recorded version newer than the latest migration is an error matching
// ErrNewer and queue.ErrConfig.
func (r *Runner) Up(ctx context.Context, to int) (from, now int, err error) {
	return r.run(ctx, to, true)
}

// Down applies down migrations from the recorded version until version to
// (>= 0; 0 drops the tables) and returns the versions before and after.
func (r *Runner) Down(ctx context.Context, to int) (from, now int, err error) {
	if to < 0 {
		return 0, 0, fmt.Errorf("migrate: cannot migrate down to version %d", to)
	}
	return r.run(ctx, to, false)
}

func (r *Runner) run(ctx context.Context, to int, up bool) (from, now int, err error) {
	ms, err := r.Dialect.Migrations()
	if err != nil {
		return 0, 0, err
	}
	latest := len(ms)
	if up && to <= 0 {
		to = latest
	}
	if to > latest {
		return 0, 0, fmt.Errorf("%w: asked for schema version %d, the latest this release knows is %d", queue.ErrConfig, to, latest)
	}
	conn, err := r.DB.Conn(ctx)
	if err != nil {
		return 0, 0, err
	}
	defer conn.Close()
	for _, p := range r.Dialect.Prepare {
		if _, err := conn.ExecContext(ctx, p); err != nil {
			return 0, 0, fmt.Errorf("preparing the connection (%s): %w", p, err)
		}
	}
	if r.Dialect.SessionLock != "" {
		if err := lock(ctx, conn, r.Dialect.SessionLock, r.LockKey); err != nil {
			return 0, 0, err
		}
		defer func() {
			if _, uerr := conn.ExecContext(context.WithoutCancel(ctx), r.Dialect.SessionUnlock, r.LockKey); uerr != nil {
				// A connection that may still hold the lock is not pooled.
				_ = conn.Raw(func(any) error { return driver.ErrBadConn })
			}
		}()
	}
	if r.Dialect.WholeRun {
		if err := begin(ctx, conn, r.Dialect.Begin); err != nil {
			return 0, 0, err
		}
		defer func() { err = end(ctx, conn, err) }()
	}
	from = -1
	for tries := 1; ; tries++ {
		v, done, err := r.step(ctx, conn, ms, to, up)
		if err != nil && r.Dialect.Begin != "" && r.Dialect.Conflict != nil && r.Dialect.Conflict(err) && tries < 3 {
			continue // rolled back whole: run the file again
		}
		if err == nil {
			tries = 0
		}
		if from < 0 {
			from = v
		}
		if err != nil && r.Dialect.Begin == "" {
			// A file cut short outside a transaction may leave state on
			// the session (MySQL's LOCK TABLES of a recount): the
			// connection is not pooled.
			_ = conn.Raw(func(any) error { return driver.ErrBadConn })
		}
		if err != nil || done {
			return from, v, err
		}
	}
}

// step applies one migration towards to in its own transaction (where the
// dialect has them). It returns the version before the step and done when
// there was nothing to do.
func (r *Runner) step(ctx context.Context, conn *sql.Conn, ms []Migration, to int, up bool) (v int, done bool, err error) {
	d := r.Dialect
	if d.Begin != "" && !d.WholeRun {
		if err := begin(ctx, conn, d.Begin); err != nil {
			return 0, false, err
		}
		defer func() { err = end(ctx, conn, err) }()
		if d.TxLock != "" {
			if err := lock(ctx, conn, d.TxLock, r.LockKey); err != nil {
				return 0, false, err
			}
		}
	}
	if v, err = r.Version(ctx, conn); err != nil {
		return 0, false, err
	}
	if v > len(ms) {
		return v, false, fmt.Errorf("%w: tables %s have schema version %d, this release knows up to %d: upgrade github.com/meridianjobs/meridian", ErrNewer, r.Meta, v, len(ms))
	}
	var m Migration
	var text, file string
	var want int
	switch {
	case up && v < to:
		m, want = ms[v], v+1
		text, file = m.Up, fmt.Sprintf("%04d_%s.up.sql", m.Version, m.Name)
	case !up && v > to:
		m, want = ms[v-1], v-1
		text, file = m.Down, fmt.Sprintf("%04d_%s.down.sql", m.Version, m.Name)
	default:
		return v, true, nil
	}
	text, err = Render(text, r.Vars)
	if err != nil {
		return v, false, fmt.Errorf("%w (in %s/%s)", err, d.Dir, file)
	}
	for _, s := range Statements(text) {
		if _, err := conn.ExecContext(ctx, s); err != nil {
			if d.Redundant != nil && isAlter(s) && d.Redundant(err) {
				continue
			}
			return v, false, fmt.Errorf("applying %s/%s: %w (statement: %.120s)", d.Dir, file, err, s)
		}
	}
	got, err := r.Version(ctx, conn)
	if err != nil {
		return v, false, err
	}
	if got != want {
		return v, false, fmt.Errorf("migrate: %s/%s left schema version %d, not %d", d.Dir, file, got, want)
	}
	return v, false, nil
}

// begin opens a migration transaction on conn with the dialect's Begin.
func begin(ctx context.Context, conn *sql.Conn, stmt string) error {
	if _, err := conn.ExecContext(ctx, stmt); err != nil {
		return fmt.Errorf("beginning a migration transaction: %w", err)
	}
	return nil
}

// end ends the transaction begin opened: commits it when err is nil,
// rolls it back otherwise (even when ctx is done; a connection that may
// still hold the transaction is discarded rather than pooled). It returns
// err, or the commit's error.
func end(ctx context.Context, conn *sql.Conn, err error) error {
	if err == nil {
		if _, err = conn.ExecContext(ctx, "COMMIT"); err == nil {
			return nil
		}
		err = fmt.Errorf("committing migration: %w", err)
	}
	if _, rerr := conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK"); rerr != nil {
		_ = conn.Raw(func(any) error { return driver.ErrBadConn })
	}
	return err
}

// lock runs a lock query that returns 1 once the lock is held.
func lock(ctx context.Context, conn *sql.Conn, query, key string) error {
	var ok sql.NullInt64
	if err := conn.QueryRowContext(ctx, query, key).Scan(&ok); err != nil {
		return fmt.Errorf("taking the migration lock %s: %w", key, err)
	}
	if !ok.Valid || ok.Int64 != 1 {
		return fmt.Errorf("taking the migration lock %s: timed out", key)
	}
	return nil
}

// isAlter reports whether statement s (comment lines first) is an ALTER
// TABLE.
func isAlter(s string) bool {
	for line := range strings.SplitSeq(s, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "--") {
			continue
		}
		return strings.HasPrefix(strings.ToUpper(line), "ALTER TABLE")
	}
	return false
}
