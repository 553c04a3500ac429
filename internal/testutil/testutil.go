// Package testutil holds what the project's tests share: the database
// servers they run against, names of their own for tables, polling with a
// deadline, and a TestMain that checks for leaked goroutines and says which
// server tests were skipped.
//
// # Servers
//
// Tests that need PostgreSQL, MariaDB/MySQL or Redis call [DSN] with
// [PostgresEnv], [MySQLEnv] or [RedisEnv]. When the variable is unset the
// test is skipped, and [Main] prints one line for the package naming the
// variable and how many tests it skipped. Under CI=true an unset variable
// or a server that does not answer fails the test instead: CI must test
// every driver.
//
// # Leaks
//
// [Main] runs the package's tests, then fails the run if any goroutine
// other than the runtime's is still running (go.uber.org/goleak, which
// waits a little for goroutines on their way out). No package needs an
// exception today: every test closes the databases, pools and workers it
// opened.
package testutil

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"io"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"go.uber.org/goleak"
)

// The environment variables that name the test servers.
const (
	PostgresEnv = "MERIDIAN_POSTGRES_DSN"
	MySQLEnv    = "MERIDIAN_MYSQL_DSN"
	// RedisEnv names a Redis server by address (127.0.0.1:6379) or URL
	// (redis://...). Tests on it use keys of their own prefix and delete
	// them when they end: the server may be shared.
	RedisEnv = "MERIDIAN_REDIS_ADDR"
	// RedisClusterEnv names a Redis Cluster by the addresses of its nodes,
	// comma-separated (127.0.0.1:7000,127.0.0.1:7001,...); .ci/redis-cluster
	// starts one on loopback and prints them. Tests on it use keys of
	// their own prefix and delete them when they end.
	RedisClusterEnv = "MERIDIAN_REDIS_CLUSTER"
)

// Examples are the DSNs of the servers on the project's machines, shown in
// skip messages.
var Examples = map[string]string{
	PostgresEnv: "postgres://postgres@127.0.0.1:5432/test?sslmode=disable",
	MySQLEnv:    "root@tcp(127.0.0.1:3306)/test?parseTime=true",
	RedisEnv:    "127.0.0.1:6379",
	RedisClusterEnv: "127.0.0.1:7000,127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003,127.0.0.1:7004,127.0.0.1:7005" +
		" (.ci/redis-cluster start prints it)",
}

var (
	skipMu  sync.Mutex
	skipped = map[string]int{} // env -> tests skipped for it
)

// CI reports whether the tests run under CI (CI=true), where a missing
// server is a failure, not a skip.
func CI() bool { return os.Getenv("CI") == "true" }

// DSN returns the DSN in env (PostgresEnv or MySQLEnv). When it is unset
// the test is skipped (and counted for Main's summary), or fails under
// CI=true.
func DSN(t testing.TB, env string) string {
	t.Helper()
	v := os.Getenv(env)
	if v != "" {
		return v
	}
	if CI() {
		t.Fatalf("%s is not set; CI must test against a real server (e.g. %s)", env, Examples[env])
	}
	skipMu.Lock()
	skipped[env]++
	skipMu.Unlock()
	t.Skipf("%s is not set: skipping this server test (e.g. %s)", env, Examples[env])
	return ""
}

// Unreachable skips t, or fails it under CI=true, for a server named by env
// that did not answer.
func Unreachable(t testing.TB, env string, err error) {
	t.Helper()
	if CI() {
		t.Fatalf("the server at %s does not answer: %v", env, err)
	}
	t.Skipf("the server at %s does not answer: %v", env, err)
}

// OpenDB opens driverName's *sql.DB on the DSN in env, checks that the
// server answers (see Unreachable) and closes it when the test ends.
func OpenDB(t testing.TB, driverName, env string) *sql.DB {
	t.Helper()
	dsn := DSN(t, env)
	db, err := sql.Open(driverName, dsn)
	if err != nil {
		t.Fatalf("opening %s: %v", env, err)
	}
	t.Cleanup(func() { db.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		Unreachable(t, env, err)
	}
	return db
}

// Name returns prefix followed by 12 random hex digits: a table or queue
// name no other test, package or concurrent run uses.
func Name(prefix string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// Eventually checks cond until it holds, failing t with the message made
// of format and args if it does not within timeout. It waits as
// [WaitFor] does between checks, so it costs nothing when cond holds at
// once. Inside a testing/synctest bubble the timeout and the waits are on
// the bubble's clock.
func Eventually(t testing.TB, timeout time.Duration, cond func() bool, format string, args ...any) {
	t.Helper()
	if !WaitFor(timeout, cond) {
		t.Fatalf("after %v: "+format, append([]any{timeout}, args...)...)
	}
}

// WaitFor checks cond until it holds or timeout has passed, and reports
// whether it held. It waits a little longer between checks as time passes
// (1 ms at first, at most 50 ms). Use it instead of [Eventually] when the
// failure message should show the state at the deadline; cond may call
// t.Fatal, as WaitFor runs it on the caller's goroutine.
func WaitFor(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for delay := time.Millisecond; !cond(); delay = min(2*delay, 50*time.Millisecond) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(delay)
	}
	return true
}

// Main runs the package's tests for TestMain, then prints one line per
// server variable that skipped tests (see DSN) and fails the run on leaked
// goroutines. after run first, once the tests are done (removing what
// the tests built, say). Use it as
//
//	func TestMain(m *testing.M) { testutil.Main(m) }
func Main(m *testing.M, after ...func()) {
	code := m.Run()
	for _, f := range after {
		f()
	}
	out, closeOut := summaryOut()
	summary(out)
	closeOut()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: goroutines left running after the tests: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// summary writes the skip lines.
func summary(w io.Writer) {
	skipMu.Lock()
	defer skipMu.Unlock()
	pkg := strings.TrimSuffix(filepath.Base(os.Args[0]), ".test")
	for _, env := range slices.Sorted(maps.Keys(skipped)) {
		fmt.Fprintf(w, "%s: %d server test(s) skipped: %s is not set (e.g. %s)\n", pkg, skipped[env], env, Examples[env])
	}
}

// summaryOut is where the skip lines go: the terminal when there is one,
// because `go test ./...` shows a passing package's output only with -v,
// else standard output.
func summaryOut() (io.Writer, func()) {
	if tty, err := os.OpenFile("/dev/tty", os.O_WRONLY, 0); err == nil {
		return tty, func() { tty.Close() }
	}
	return os.Stdout, func() {}
}

// QueueURL returns the queue URL (postgres:// or mysql://) of the server
// in env (see DSN) with the table parameter set to table: the form
// queue.Open and the CLI take. A MySQL DSN (user@tcp(host:port)/db) is
// rewritten as a mysql:// URL; its own parameters are dropped, since
// sqlqueue needs none of them.
func QueueURL(t testing.TB, env, table string) string {
	t.Helper()
	driver := "pgx"
	if env == MySQLEnv {
		driver = "mysql"
	}
	return DSNQueueURL(t, driver, DSN(t, env), table)
}

// DSNQueueURL is QueueURL for the DSN dsn of database/sql driver driver
// ("mysql", or a PostgreSQL URL for any other): a Server's Source.
func DSNQueueURL(t testing.TB, driver, dsn, table string) string {
	t.Helper()
	if driver == "mysql" {
		cfg, err := mysql.ParseDSN(dsn)
		if err != nil {
			t.Fatalf("%s: %v", dsn, err)
		}
		u := url.URL{Scheme: "mysql", User: url.UserPassword(cfg.User, cfg.Passwd), Host: cfg.Addr, Path: "/" + cfg.DBName}
		if cfg.Passwd == "" {
			u.User = url.User(cfg.User)
		}
		u.RawQuery = url.Values{"table": {table}}.Encode()
		return u.String()
	}
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatalf("%s: %v", dsn, err)
	}
	v := u.Query()
	v.Set("table", table)
	u.RawQuery = v.Encode()
	return u.String()
}

// NullStrings scans the current row of rows, which has n columns, as
// strings (NULL where the column is NULL): for tests that read EXPLAIN
// output or SHOW statements whose columns vary by server.
func NullStrings(rows *sql.Rows, n int) ([]sql.NullString, error) {
	vals := make([]sql.NullString, n)
	ptrs := make([]any, n)
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	return vals, rows.Scan(ptrs...)
}
