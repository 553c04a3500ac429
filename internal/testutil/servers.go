package testutil

import (
	"database/sql"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Server is a database server of a test's own, which the test may restart
// (the fault suite, the dashboard's cold measurements): the shared servers
// of [DSN] must never be restarted. The caller's test binary registers
// Driver with database/sql.
type Server struct {
	Driver, Source string
	// Restart stops the server and starts it again, and returns once it
	// answers.
	Restart func(t testing.TB)
}

// NeedPrograms skips the test when a program it runs is missing, and fails
// it under CI=true, as DSN does for a server variable. why says what needs
// them.
func NeedPrograms(t testing.TB, why string, names ...string) {
	t.Helper()
	for _, name := range names {
		if _, err := exec.LookPath(name); err != nil {
			if CI() {
				t.Fatalf("%s needs %s under CI: %v", why, name, err)
			}
			t.Skipf("%s needs %s to run a server of its own: %v", why, name, err)
		}
	}
}

// FreePort returns a TCP port nothing listens on at the moment.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// RunCmd runs a program and fails the test with its output if it fails.
func RunCmd(t testing.TB, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

// WaitServer waits until the server at driver/source answers a ping.
func WaitServer(t testing.TB, driver, source string, within time.Duration) {
	t.Helper()
	db, err := sql.Open(driver, source)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	deadline := time.Now().Add(within)
	for {
		err := db.PingContext(t.Context())
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server did not come up within %v: %v", within, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// PostgresServer makes a PostgreSQL cluster of the test's own (version 15,
// or $MERIDIAN_FAULT_PG_VERSION) with pg_createcluster on a free port,
// trusting local connections, started; Source is its postgres database
// through driver "pgx". Restart is pg_ctlcluster's fast restart. The
// cluster is dropped at cleanup. settings are postgresql.conf lines
// ("shared_buffers=256MB") for pg_createcluster's -o.
func PostgresServer(t testing.TB, why string, settings ...string) *Server {
	t.Helper()
	NeedPrograms(t, why, "pg_createcluster", "pg_ctlcluster", "pg_dropcluster")
	version := "15"
	if v := os.Getenv("MERIDIAN_FAULT_PG_VERSION"); v != "" {
		version = v
	}
	name := fmt.Sprintf("meridian_%d_%d", os.Getpid(), rand.IntN(1e6))
	port := FreePort(t)
	args := []string{version, name, "--port", strconv.Itoa(port)}
	for _, s := range settings {
		args = append(args, "-o", s)
	}
	RunCmd(t, "pg_createcluster", append(args, "--", "--auth=trust")...)
	t.Cleanup(func() {
		if out, err := exec.Command("pg_dropcluster", version, name, "--stop").CombinedOutput(); err != nil {
			t.Errorf("pg_dropcluster %s %s: %v\n%s", version, name, err, out)
		}
	})
	RunCmd(t, "pg_ctlcluster", "--skip-systemctl-redirect", version, name, "start")
	s := &Server{Driver: "pgx", Source: fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)}
	WaitServer(t, s.Driver, s.Source, time.Minute)
	s.Restart = func(t testing.TB) {
		RunCmd(t, "pg_ctlcluster", "--skip-systemctl-redirect", version, name, "restart", "-m", "fast")
		WaitServer(t, s.Driver, s.Source, time.Minute)
	}
	return s
}

// MariaDBServer starts a mariadbd of the test's own on a data directory
// and port of its own, with an InnoDB buffer pool of bufferPool ("64M"),
// and creates database; Source is that database through driver "mysql".
// Restart kills the server with SIGKILL (a crash) and starts it again.
// Grants are skipped: the server listens on 127.0.0.1 only and lives for
// the test.
func MariaDBServer(t testing.TB, why, bufferPool, database string) *Server {
	t.Helper()
	NeedPrograms(t, why, "mariadb-install-db", "mariadbd")
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	RunCmd(t, "mariadb-install-db", "--no-defaults", "--datadir="+data, "--user=root", "--auth-root-authentication-method=normal")
	port := FreePort(t)
	var mu sync.Mutex
	var cmd *exec.Cmd
	start := func(t testing.TB) {
		c := exec.Command("mariadbd", "--no-defaults", "--datadir="+data, "--port="+strconv.Itoa(port),
			"--socket="+filepath.Join(dir, "mysqld.sock"), "--user=root", "--bind-address=127.0.0.1",
			"--skip-grant-tables", "--skip-name-resolve", "--innodb-buffer-pool-size="+bufferPool, "--log-error="+filepath.Join(dir, "error.log"),
			// Temporary tables in a directory of its own: another
			// program cleaning /tmp deleted them under a query.
			"--tmpdir="+dir)
		if err := c.Start(); err != nil {
			t.Fatalf("starting mariadbd: %v", err)
		}
		mu.Lock()
		cmd = c
		mu.Unlock()
	}
	kill := func() {
		mu.Lock()
		defer mu.Unlock()
		if cmd != nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			cmd = nil
		}
	}
	start(t)
	t.Cleanup(kill)
	root := fmt.Sprintf("root@tcp(127.0.0.1:%d)/", port)
	WaitServer(t, "mysql", root, time.Minute)
	db, err := sql.Open("mysql", root)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(t.Context(), "CREATE DATABASE "+database); err != nil {
		t.Fatal(err)
	}
	db.Close()
	s := &Server{Driver: "mysql", Source: root + database}
	s.Restart = func(t testing.TB) {
		kill()
		start(t)
		WaitServer(t, s.Driver, s.Source, time.Minute)
	}
	return s
}
