package main

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/meridianjobs/meridian/internal/urlquery"
	"github.com/meridianjobs/meridian/queue"
)

// What every command shares: its streams, flag parsing that takes flags and
// arguments in any order, exit codes, and the ways to name a queue.

// stdio is a command's standard streams. in is read only by the commands
// that ask for confirmation; inTerminal says whether a person can answer.
type stdio struct {
	out, errOut io.Writer
	in          io.Reader
	inTerminal  bool
}

// Exit codes: 0 success, 1 the command failed, 2 the command line was wrong.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
)

// usageError is a command line the command cannot run: exit code 2.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error {
	return usageError{fmt.Errorf(format, args...)}
}

// errHelp is returned by parseArgs after printing a command's help: exit 0.
var errHelp = flag.ErrHelp

// exitCode maps a command's error to the process exit code.
func exitCode(err error) int {
	var ue usageError
	switch {
	case err == nil, errors.Is(err, errHelp):
		return exitOK
	case errors.As(err, &ue):
		return exitUsage
	default:
		return exitFailure
	}
}

// newFlags returns a flag set that prints its usage to errOut, and a --dsn
// flag defaulting to $MERIDIAN_DSN.
func newFlags(name, usage string, errOut io.Writer) (*flag.FlagSet, *string) {
	fs := flag.NewFlagSet("meridian "+name, flag.ContinueOnError)
	fs.SetOutput(errOut)
	dsn := fs.String("dsn", os.Getenv("MERIDIAN_DSN"), "the queue: "+dsnForms+" (default $MERIDIAN_DSN)")
	fs.Usage = func() {
		fmt.Fprintln(errOut, "usage: meridian "+name+" "+usage)
		fs.PrintDefaults()
		fmt.Fprintln(errOut, "\nFlags and arguments may come in any order; -- ends the flags.\nExit status: 0 done, 1 failed, 2 wrong command line.")
	}
	return fs, dsn
}

// parseArgs parses args into fs, taking flags wherever they stand among the
// positional arguments (which it returns in order); everything after "--"
// is positional. It returns errHelp after printing the usage for -h, and a
// usageError for a bad flag.
func parseArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, errHelp
			}
			return nil, usageError{err}
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if consumed := args[:len(args)-len(rest)]; len(consumed) > 0 && consumed[len(consumed)-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// dsnForms names the accepted ways to write --dsn, for help and errors.
// memory:// is not among them: a memory queue lives inside one process,
// so no command can look at another's.
const dsnForms = "sqlite://PATH or a path to a SQLite file, postgres://USER@HOST:PORT/DB, " +
	"mysql://USER:PASS@HOST:PORT/DB or USER:PASS@tcp(HOST:PORT)/DB, redis://HOST:PORT/DB?prefix=NAME"

// queueURL turns what the user wrote as --dsn into a queue URL: URLs pass
// as they are, a MySQL driver DSN (user@tcp(host:port)/db) becomes a
// mysql:// URL and a path to a SQLite file a sqlite:// URL. A query that
// url.ParseQuery rejects (table=staging;jobs) is a usage error, not a
// parameter silently dropped.
func queueURL(dsn string) (string, error) {
	raw, err := convertDSN(dsn)
	if err != nil {
		return "", err
	}
	if u, perr := url.Parse(raw); perr == nil {
		if _, err := urlquery.Values(u); err != nil {
			return "", usagef("%q is not a valid queue URL: %v", redact(dsn), err)
		}
	}
	return raw, nil
}

// convertDSN is queueURL before the query is checked.
func convertDSN(dsn string) (string, error) {
	if dsn == "" {
		return "", usagef("no queue: pass --dsn or set MERIDIAN_DSN (%s)", dsnForms)
	}
	if strings.HasPrefix(dsn, "sqlite:") {
		return dsn, nil
	}
	if strings.Contains(dsn, "://") {
		// A URL: queue.Open names an unknown scheme, but one that does
		// not parse is the command line's fault.
		if _, err := url.Parse(dsn); err != nil {
			return "", usagef("%q is not a valid queue URL (%v); use %s", redact(dsn), errors.Unwrap(err), dsnForms)
		}
		return dsn, nil
	}
	if strings.Contains(dsn, "@tcp(") || strings.Contains(dsn, "@unix(") || strings.HasPrefix(dsn, "tcp(") {
		return mysqlURL(dsn)
	}
	if looksLikeSQLitePath(dsn) {
		return "sqlite://" + dsn, nil
	}
	return "", usagef("%q is not a queue this command knows; use %s", redact(dsn), dsnForms)
}

// looksLikeSQLitePath reports whether p names a SQLite file: an existing
// file, or a name with a SQLite extension.
func looksLikeSQLitePath(p string) bool {
	if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
		return true
	}
	for _, ext := range []string{".db", ".sqlite", ".sqlite3", ".db3"} {
		if strings.HasSuffix(p, ext) {
			return true
		}
	}
	return false
}

// mysqlURL converts the MySQL driver's DSN into a mysql:// URL, keeping the
// DSN's parameters.
func mysqlURL(dsn string) (string, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return "", usagef("reading %q as a MySQL DSN: %v", redact(dsn), err)
	}
	if cfg.Net != "tcp" {
		return "", usagef("MySQL over %s is not supported; use %s", cfg.Net, dsnForms)
	}
	u := url.URL{Scheme: "mysql", Host: cfg.Addr, Path: "/" + cfg.DBName}
	switch {
	case cfg.Passwd != "":
		u.User = url.UserPassword(cfg.User, cfg.Passwd)
	case cfg.User != "":
		u.User = url.User(cfg.User)
	}
	if _, query, ok := strings.Cut(dsn, "?"); ok {
		u.RawQuery = query
	}
	if _, err := url.Parse(u.String()); err != nil {
		return "", usagef("reading %q as a MySQL DSN: address %q or database %q cannot be part of a URL", redact(dsn), cfg.Addr, cfg.DBName)
	}
	return u.String(), nil
}

// redact hides a password in s, a URL or a MySQL DSN, for error messages.
func redact(s string) string {
	if u, err := url.Parse(s); err == nil && u.User != nil {
		return u.Redacted()
	}
	if at := strings.LastIndex(s, "@"); at >= 0 {
		if user, _, ok := strings.Cut(s[:at], ":"); ok {
			return user + ":xxxxx" + s[at:]
		}
	}
	return s
}

// refuseUnattended refuses to do action without yes when no person can
// answer a question on standard input: a usage error (exit 2), so that a
// script never destroys by accident.
func refuseUnattended(s stdio, yes bool, action string) error {
	if !yes && !s.inTerminal {
		return usagef("refusing to %s without --yes: standard input is not a terminal to confirm on", action)
	}
	return nil
}

// ask puts question to the person at the terminal and returns nil only
// when the answer is y or yes; otherwise an error (exit 1) saying that
// nothing changed.
func ask(s stdio, question string) error {
	fmt.Fprintf(s.errOut, "%s [y/N] ", question)
	answer, _ := bufio.NewReader(s.in).ReadString('\n')
	if a := strings.ToLower(strings.TrimSpace(answer)); a != "y" && a != "yes" {
		return errors.New("not confirmed: nothing changed")
	}
	return nil
}

// sqlitePath returns the file of a sqlite:// URL u.
func sqlitePath(u *url.URL) string {
	if u.Opaque != "" {
		return u.Opaque
	}
	return u.Host + u.Path
}

// checkSQLiteDir fails, naming the directory, when the directory that
// would hold the SQLite file at path does not exist: SQLite creates the
// file, not its directory, and says only "unable to open database file".
func checkSQLiteDir(path string) error {
	if path == ":memory:" || strings.HasPrefix(path, "file:") {
		return nil
	}
	dir := filepath.Dir(path)
	fi, err := os.Stat(dir)
	switch {
	case err != nil:
		return fmt.Errorf("no directory %s for the SQLite database %s (%w): create the directory first", dir, path, queue.ErrConfig)
	case !fi.IsDir():
		return fmt.Errorf("%s, where the SQLite database %s would go, is not a directory (%w)", dir, path, queue.ErrConfig)
	}
	return nil
}

// openQueue opens the queue dsn names as its driver's opener does,
// creating its tables if missing: for the commands that write.
func openQueue(ctx context.Context, dsn string) (queue.QueueCloser, error) {
	u, err := queueURL(dsn)
	if err != nil {
		return nil, err
	}
	return queue.Open(ctx, u)
}

// openExisting opens the queue dsn names without creating anything: no
// Setup on a database server, and a SQLite file must exist. It then checks
// that the tables are there, so a typo in the table or database name fails
// at once, naming what was looked for. Every command but migrate opens so.
func openExisting(ctx context.Context, dsn string) (queue.QueueCloser, error) {
	raw, err := queueURL(dsn)
	if err != nil {
		return nil, err
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, usagef("parsing the queue URL: %v", err)
	}
	switch u.Scheme {
	case "memory":
		return nil, usagef("a memory:// queue lives inside one process: this command can only look at a database (%s)", dsnForms)
	case "sqlite":
		path := sqlitePath(u)
		if path == ":memory:" {
			return nil, usagef("sqlite::memory: is a new empty database: this command can only look at an existing one")
		}
		if err := checkSQLite(ctx, path, u.Query().Get("table"), raw); err != nil {
			return nil, err
		}
	}
	v := u.Query()
	v.Set("setup", "false")
	u.RawQuery = v.Encode()
	q, err := queue.Open(ctx, u.String())
	if err != nil {
		return nil, err
	}
	// Len is on every queue and, on the SQL drivers, checks the schema
	// first: a missing table comes back as an error naming it.
	if _, err := q.Len(ctx, ""); err != nil {
		_ = q.Close()
		return nil, err
	}
	return q, nil
}

// defaultTable is sqlqueue's jobs table when WithTable is not given.
const defaultTable = "meridian_jobs"

// checkSQLite checks, reading the file only, that the SQLite database at
// path has the queue's tables: opening it as a queue would switch the file
// to WAL and, without the tables, fail after that.
func checkSQLite(ctx context.Context, path, table, raw string) error {
	if err := checkSQLiteDir(path); err != nil {
		return err
	}
	if _, err := os.Stat(path); err != nil {
		return fmt.Errorf("no SQLite database %s (%w): this command creates nothing; `meridian migrate --dsn %s` creates one", path, queue.ErrConfig, raw)
	}
	if table == "" {
		table = defaultTable
	}
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		return fmt.Errorf("opening %s read-only: %w", path, err)
	}
	defer db.Close()
	var n int
	err = db.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?", table+"_meta").Scan(&n)
	if err != nil {
		return fmt.Errorf("reading %s: %w", path, err)
	}
	if n == 0 {
		return fmt.Errorf("table %s_meta does not exist in %s (%w): this command creates nothing; `meridian migrate --dsn %s` creates the tables", table, path, queue.ErrConfig, raw)
	}
	return nil
}

// writeJSON writes v as indented JSON and a newline.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// optTime is t for an optional JSON field: nil when t is zero.
func optTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// timeOrDash is t in RFC 3339, UTC, or "-" when t is zero.
func timeOrDash(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}
