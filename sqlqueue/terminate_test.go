package sqlqueue_test

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/meridianjobs/meridian/internal/testutil"
	"github.com/meridianjobs/meridian/queue/driver"
	"github.com/meridianjobs/meridian/sqlqueue"
)

// TestTerminateProcesses terminates a fleet of three worker processes
// through the store (docs/semantics.md, "Fleet commands"), on SQLite,
// PostgreSQL and MariaDB: each process, while running two jobs, gets the
// command from the store, finishes the jobs it started, and exits with
// Run's ErrTerminated (faultworker's status 4); no job is lost (every job
// started ended, the others are left pending), and a process started after
// the command works the rest and keeps running. The jobs are faultworker's
// Work (faults_test.go): each records its start ("S"), sleeps FAULT_SLEEP
// and records its end ("E").
func TestTerminateProcesses(t *testing.T) {
	t.Parallel()
	type store struct {
		name, driver string
		open         func(t *testing.T) (source, table string, q *sqlqueue.Queue)
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
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			bin := buildFaultWorker(t)
			source, table, q := st.open(t)
			const jobs = 30
			for i := range jobs {
				if err := q.Push(t.Context(), mustJob(t, Work{N: i}, fmt.Sprintf("work-%02d", i))); err != nil {
					t.Fatal(err)
				}
			}
			dir := t.TempDir()
			env := append(os.Environ(), "FAULT_DRIVER="+st.driver, "FAULT_SOURCE="+source, "FAULT_TABLE="+table,
				"FAULT_POLL=50ms", "FAULT_CONCURRENCY=2", "FAULT_LEASE=30s", "FAULT_SLEEP=2s")
			var procs []*pauseProc
			for _, name := range []string{"A", "B", "C"} {
				procs = append(procs, startPauseProc(t, bin, dir, name, env))
			}
			if !testutil.WaitFor(30*time.Second, func() bool {
				for _, p := range procs {
					if p.count(t, "S") == 0 {
						return false
					}
				}
				return true
			}) {
				t.Fatalf("not every process started a job: %s%s%s", procs[0].stderr(t), procs[1].stderr(t), procs[2].stderr(t))
			}
			if err := q.CommandWorkers(t.Context(), "", driver.CommandTerminate); err != nil {
				t.Fatal(err)
			}
			for i, p := range procs {
				select {
				case <-p.done:
				case <-time.After(30 * time.Second):
					t.Fatalf("process %d did not exit after the terminate", i)
				}
				if ps := p.cmd.ProcessState; ps == nil || ps.ExitCode() != 4 {
					t.Fatalf("process %d exited with %v, want status 4 (ErrTerminated): %s", i, ps, p.stderr(t))
				}
			}
			started, ended := map[string]bool{}, map[string]bool{}
			for _, p := range procs {
				for _, r := range p.recs(t) {
					switch r.kind {
					case "S":
						started[r.key] = true
					case "E":
						ended[r.key] = true
					}
				}
			}
			for id := range started {
				if !ended[id] {
					t.Errorf("job %s started and did not finish before its process exited", id)
				}
			}
			if n, err := q.Len(t.Context(), ""); err != nil || n != jobs-len(ended) {
				t.Fatalf("Len = %d, %v after the terminate; want %d pending (%d of %d done)", n, err, jobs-len(ended), len(ended), jobs)
			}

			d := startPauseProc(t, bin, dir, "D", env)
			if !testutil.WaitFor(2*time.Minute, func() bool { n, err := q.Len(t.Context(), ""); return err == nil && n == 0 }) {
				t.Fatalf("the process started after the terminate did not work the rest: %s", d.stderr(t))
			}
			select {
			case <-d.done:
				t.Fatalf("the process started after the terminate exited: %v %s", d.cmd.ProcessState, d.stderr(t))
			default:
			}
		})
	}
}
