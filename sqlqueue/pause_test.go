package sqlqueue_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/meridianjobs/meridian/internal/testutil"
	"github.com/meridianjobs/meridian/queue/driver"
	"github.com/meridianjobs/meridian/sqlqueue"
)

// The pause cases of the fault suite (issue 25): a process that holds a
// job's lease, a concurrency slot or the leader lease is stopped with
// SIGSTOP until another process holds it, then resumed with SIGCONT. A
// paused process cannot be stopped from inside, so the rule is about what
// it does once it resumes: its context is already over at its first look
// (every check of queue.Holding or queue.Leading it makes after SIGCONT
// fails), and no write it makes is accepted. The processes are
// testdata/faultworker; each records its checks and writes ("W", with the
// time of the check and of the write's return, and its outcome), and the
// end of its hold ("C").

// Hold is faultworker's job that acts under its lease.
type Hold struct{}

// pauseRec is one record of a faultworker process.
type pauseRec struct {
	kind           string // S, W, C, E, L
	key            string // the job ID, or the leader epoch
	at, wrote      time.Time
	outcome, cause string
}

func readPauseRecs(t *testing.T, path string) []pauseRec {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	nanos := func(s string) time.Time {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatalf("record time %q: %v", s, err)
		}
		return time.Unix(0, n)
	}
	var out []pauseRec
	for line := range strings.Lines(string(b)) {
		fs := strings.SplitN(strings.TrimSpace(line), " ", 5)
		if len(fs) < 3 {
			continue
		}
		r := pauseRec{kind: fs[0], key: fs[1], at: nanos(fs[2])}
		switch r.kind {
		case "W":
			if len(fs) < 5 {
				t.Fatalf("record %q", line)
			}
			r.wrote, r.outcome = nanos(fs[3]), fs[4]
		case "C":
			r.cause = strings.Join(fs[3:], " ")
		}
		out = append(out, r)
	}
	return out
}

// pauseProc is one faultworker process.
type pauseProc struct {
	cmd  *exec.Cmd
	log  string
	done chan struct{}
}

func startPauseProc(t *testing.T, bin, dir, name string, env []string) *pauseProc {
	t.Helper()
	p := &pauseProc{log: filepath.Join(dir, name+".log"), done: make(chan struct{})}
	p.cmd = exec.Command(bin)
	p.cmd.Env = append(slices.Clone(env), "FAULT_LOG="+p.log)
	stderr, err := os.Create(p.log + ".stderr")
	if err != nil {
		t.Fatal(err)
	}
	p.cmd.Stderr = stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stderr.Close()
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Signal(syscall.SIGCONT)
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

func (p *pauseProc) recs(t *testing.T) []pauseRec { return readPauseRecs(t, p.log) }

func (p *pauseProc) count(t *testing.T, kind string) int {
	n := 0
	for _, r := range p.recs(t) {
		if r.kind == kind {
			n++
		}
	}
	return n
}

func (p *pauseProc) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
}

// probe opens the SQLite file path for a lock probe: a short busy timeout.
func probe(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(200)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// lockable reports whether every row of the MariaDB tables of the store
// table (the jobs, their counts, the leader lease...) can be locked at once
// in source: false when another transaction holds one of them.
// NOWAIT makes each lock fail at once rather than wait, so the probe needs
// no short deadline of its own.
func lockable(t *testing.T, source, table string) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	db, err := sql.Open("mysql", source)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.QueryContext(ctx, `SELECT table_name FROM information_schema.tables
		WHERE table_schema = DATABASE() AND (table_name = ? OR table_name LIKE CONCAT(REPLACE(?, '_', '\\_'), '\\_%'))`, table, table)
	if err != nil {
		return false
	}
	defer rows.Close()
	var tables []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return false
		}
		tables = append(tables, name)
	}
	if rows.Err() != nil || len(tables) == 0 {
		return false
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return false
	}
	defer tx.Rollback()
	for _, name := range tables {
		if _, err := tx.ExecContext(ctx, "SELECT 1 FROM `"+name+"` FOR UPDATE NOWAIT"); err != nil {
			return false
		}
	}
	return true
}

func (p *pauseProc) stderr(t *testing.T) string {
	b, _ := os.ReadFile(p.log + ".stderr")
	return string(b)
}

// TestPauseSIGSTOP stops a holder with SIGSTOP until another process holds
// what it held, on SQLite, PostgreSQL and MariaDB: a job's lease (2 s), a
// Concurrency(1) slot (2 s, under a 10 s job lease) and the leader lease
// (TTL 2 s).
func TestPauseSIGSTOP(t *testing.T) {
	t.Parallel()
	type store struct {
		name   string
		driver string
		open   func(t *testing.T) (source, table string, q *sqlqueue.Queue)
	}
	server := func(d sqlqueue.Dialect, driver, env string) func(t *testing.T) (string, string, *sqlqueue.Queue) {
		return func(t *testing.T) (string, string, *sqlqueue.Queue) {
			s := newStore(t, serverBackend(t, d, driver, env))
			return testutil.DSN(t, env), s.table, s.queue(t)
		}
	}
	stores := []store{
		{"sqlite", "sqlite", func(t *testing.T) (string, string, *sqlqueue.Queue) {
			s := newStore(t, sqliteBackend())
			return s.path, s.table, s.queue(t)
		}},
		{"postgres", "pgx", server(sqlqueue.Postgres, "pgx", "MERIDIAN_POSTGRES_DSN")},
		{"mysql", "mysql", server(sqlqueue.MySQL, "mysql", "MERIDIAN_MYSQL_DSN")},
	}
	modes := []struct {
		name  string
		jobs  int
		env   []string
		other string // the record that says B holds what A held
	}{
		{"job", 1, []string{"FAULT_LEASE=2s"}, "S"},
		{"slot", 2, []string{"FAULT_LEASE=10s", "FAULT_SLOT=2s"}, "S"},
		{"leader", 0, []string{"FAULT_LEASE=2s", "FAULT_MODE=leader"}, "L"},
	}
	for _, st := range stores {
		for _, m := range modes {
			t.Run(st.name+"/"+m.name, func(t *testing.T) {
				t.Parallel()
				bin := buildFaultWorker(t)
				source, table, q := st.open(t)
				for i := range m.jobs {
					j := mustJob(t, Hold{}, fmt.Sprintf("hold-%d", i))
					if m.name == "slot" {
						j.Queue = []string{"A", "B"}[i] // each process's own queue; one slot for both
					}
					if err := q.Push(t.Context(), j); err != nil {
						t.Fatal(err)
					}
				}
				dir := t.TempDir()
				env := append(os.Environ(), "FAULT_DRIVER="+st.driver, "FAULT_SOURCE="+source, "FAULT_TABLE="+table,
					"FAULT_POLL=20ms", "FAULT_CONCURRENCY=1")
				env = append(env, m.env...)
				procEnv := func(name, sleep string) []string {
					e := append(slices.Clone(env), "FAULT_SLEEP="+sleep)
					if m.name == "slot" {
						e = append(e, "FAULT_QUEUES="+name)
					}
					return e
				}
				a := startPauseProc(t, bin, dir, "A", procEnv("A", "30s"))
				if !testutil.WaitFor(20*time.Second, func() bool { return a.count(t, "W") >= 3 }) {
					t.Fatalf("A does not act: %s", a.stderr(t))
				}
				// A process stopped in the middle of a transaction keeps its
				// locks (SQLite's write lock, the leader lease's row) and
				// so stops everyone: that is not the case under test, so
				// A is stopped again until it holds none.
				free := func() bool {
					ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
					defer cancel()
					switch {
					case st.name == "sqlite":
						conn, err := probe(t, source).Conn(ctx)
						if err != nil {
							return false
						}
						defer conn.Close()
						if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
							return false
						}
						_, _ = conn.ExecContext(context.Background(), "ROLLBACK")
					case st.name == "mysql" && !lockable(t, source, table):
						// InnoDB waits 50 s for a row lock: A stopped
						// between a transaction's update of a counts row
						// or of the job and its commit stops B's claim.
						return false
					case m.name == "leader":
						// A stopped inside ClaimTick holds the periodic
						// row, which B's RegisterPeriodic waits on before
						// it campaigns; a stopped renewal holds the lease.
						if _, err := q.RegisterPeriodic(ctx, driver.PeriodicInfo{Name: "stall", Schedule: "@every 1s"}); err != nil {
							return false
						}
						if _, err := q.AcquireLease(ctx, "stall", "probe", time.Microsecond); err != nil {
							return false
						}
					}
					return true
				}
				var stopped time.Time
				for try := 0; ; try++ {
					a.signal(t, syscall.SIGSTOP)
					stopped = time.Now()
					if free() {
						break
					}
					if try == 5 {
						t.Fatal("A held a lock each time it was stopped")
					}
					a.signal(t, syscall.SIGCONT)
					n := a.count(t, "W")
					if !testutil.WaitFor(5*time.Second, func() bool { return a.count(t, "W") > n }) {
						t.Fatal("A does not act after SIGCONT")
					}
				}
				b := startPauseProc(t, bin, dir, "B", procEnv("B", "300ms"))
				if !testutil.WaitFor(20*time.Second, func() bool { return b.count(t, m.other) > 0 }) {
					t.Fatalf("B did not take over while A was stopped: %s", b.stderr(t))
				}
				tookOver := time.Since(stopped)
				a.signal(t, syscall.SIGCONT)
				resumed := time.Now()
				if !testutil.WaitFor(5*time.Second, func() bool { return a.count(t, "C") > 0 }) {
					t.Error("A did not record the end of its hold within 5 s of SIGCONT")
				}
				if !testutil.WaitFor(10*time.Second, func() bool { return b.count(t, "W") >= 3 }) {
					t.Fatal("B does not act")
				}
				// A write A had sent when it was stopped may return after
				// SIGCONT, accepted: the store ran it before the other
				// process took over (a later one is refused by token or
				// epoch). Every write A starts after SIGCONT follows a
				// check, and no check may find the hold valid.
				var fails []string
				inFlight := 0
				for _, r := range a.recs(t) {
					switch {
					case r.kind == "W" && !r.at.Before(resumed):
						fails = append(fails, fmt.Sprintf("A's check at +%s after SIGCONT found its hold valid (write %s)", r.at.Sub(resumed), r.outcome))
					case r.kind == "W" && r.wrote.After(resumed):
						inFlight++
					case r.kind == "C" && !strings.Contains(r.cause, "lost"):
						fails = append(fails, fmt.Sprintf("A's hold ended with %s, want it lost", r.cause))
					}
				}
				if len(fails) > 0 {
					t.Errorf("after SIGCONT: %s", strings.Join(fails, "; "))
				}
				bOK := 0
				for _, r := range b.recs(t) {
					if r.kind == "W" && r.outcome == "ok" {
						bOK++
					}
				}
				if bOK == 0 {
					t.Errorf("none of B's writes was accepted")
				}
				t.Logf("B took over %s after SIGSTOP; %d writes of A in flight across the pause", tookOver.Round(time.Millisecond), inFlight)
			})
		}
	}
}
