package sqlqueue_test

import (
	"github.com/meridianjobs/meridian/internal/testutil"

	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
	"github.com/meridianjobs/meridian/sqlqueue"
)

type procJob struct{ N int }

// The multi-process tests run testdata/worker as separate processes over
// one database. It is built once per test run, without -race.
var (
	workerOnce sync.Once
	workerBin  string
	workerErr  error
)

func TestMain(m *testing.M) {
	testutil.Main(m, func() {
		for _, bin := range []string{workerBin, faultBin} {
			if bin != "" {
				os.RemoveAll(filepath.Dir(bin))
			}
		}
	})
}

func buildWorker(t *testing.T) string {
	t.Helper()
	workerOnce.Do(func() {
		dir, err := os.MkdirTemp("", "sqlqueue-worker")
		if err != nil {
			workerErr = err
			return
		}
		bin := filepath.Join(dir, "worker")
		out, err := exec.Command("go", "build", "-o", bin, "./testdata/worker").CombinedOutput()
		if err != nil {
			workerErr = fmt.Errorf("building testdata/worker: %v\n%s", err, out)
			return
		}
		workerBin = bin
	})
	if workerErr != nil {
		t.Fatal(workerErr)
	}
	return workerBin
}

// fleet is a set of worker processes over one store.
type fleet struct {
	t       *testing.T
	procs   []*exec.Cmd
	logs    []string
	holdLog string // where process 0 logs the jobs it holds (WORKER_HOLD_AFTER)
}

// startFleet starts n worker processes on s's table with the given lease
// and handler sleep; env0 is added to the environment of process 0 only.
func startFleet(t *testing.T, b backend, s store, n int, lease, sleep time.Duration, env0 ...string) *fleet {
	t.Helper()
	return startFleetEnv(t, b, s, n, lease, sleep, nil, env0...)
}

// startFleetEnv is startFleet with env added to every process's
// environment.
func startFleetEnv(t *testing.T, b backend, s store, n int, lease, sleep time.Duration, env []string, env0 ...string) *fleet {
	t.Helper()
	each := make([][]string, n)
	if n > 0 {
		each[0] = env0
	}
	return startFleetEach(t, b, s, lease, sleep, env, each...)
}

// startFleetEach starts a worker process per entry of each, with env and
// then the entry added to its environment.
func startFleetEach(t *testing.T, b backend, s store, lease, sleep time.Duration, env []string, each ...[]string) *fleet {
	t.Helper()
	source := s.path
	driver := "sqlite"
	switch b.dialect {
	case sqlqueue.Postgres:
		driver, source = "pgx", testutil.DSN(t, testutil.PostgresEnv)
	case sqlqueue.MySQL:
		driver, source = "mysql", testutil.DSN(t, testutil.MySQLEnv)
	}
	bin := buildWorker(t)
	dir := t.TempDir()
	fl := &fleet{t: t, holdLog: filepath.Join(dir, "held.log")}
	for i, own := range each {
		logPath := filepath.Join(dir, fmt.Sprintf("worker-%d.log", i))
		cmd := exec.Command(bin)
		cmd.Env = append(os.Environ(), "WORKER_LOG="+logPath, "WORKER_DRIVER="+driver, "WORKER_SOURCE="+source,
			"WORKER_TABLE="+s.table, "WORKER_LEASE="+lease.String(), "WORKER_SLEEP="+sleep.String(), "WORKER_HOLD_LOG="+fl.holdLog)
		cmd.Env = append(cmd.Env, env...)
		cmd.Env = append(cmd.Env, own...)
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatalf("starting worker process: %v", err)
		}
		fl.procs = append(fl.procs, cmd)
		fl.logs = append(fl.logs, logPath)
	}
	t.Cleanup(func() {
		for _, p := range fl.procs {
			_ = p.Process.Kill()
			_ = p.Wait()
		}
	})
	return fl
}

// killRounds runs rounds of the fleets start starts, whose processes kill
// themselves, until finished holds (testutil.KillRounds: limit bounds
// it), and returns the fleets and how many processes died of SIGKILL.
func killRounds(t *testing.T, limit time.Duration, finished func() bool, start func() *fleet) (fleets []*fleet, kills int) {
	t.Helper()
	kills = testutil.KillRounds(t, limit, finished, func() []*exec.Cmd {
		fl := start()
		fleets = append(fleets, fl)
		return fl.procs
	})
	return fleets, kills
}

// stop ends every process still running with SIGTERM and waits.
func (fl *fleet) stop() {
	for _, p := range fl.procs {
		if p.ProcessState == nil {
			_ = p.Process.Signal(syscall.SIGTERM)
		}
	}
	for _, p := range fl.procs {
		if p.ProcessState == nil {
			if err := p.Wait(); err != nil {
				fl.t.Errorf("worker process %d: %v", p.Process.Pid, err)
			}
		}
	}
}

type handling struct {
	proc       int
	start, end int64
	attempt    int // the job's attempt number: 1 unless a lease on it was lost before
}

// handled reads every process's log: job ID -> its handlings.
func (fl *fleet) handled() map[string][]handling {
	out := map[string][]handling{}
	for i, path := range fl.logs {
		f, err := os.Open(path)
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			fl.t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) != 4 {
				continue // a line cut by SIGKILL
			}
			start, _ := strconv.ParseInt(fields[1], 10, 64)
			end, _ := strconv.ParseInt(fields[2], 10, 64)
			attempt, _ := strconv.Atoi(fields[3])
			out[fields[0]] = append(out[fields[0]], handling{i, start, end, attempt})
		}
		f.Close()
	}
	return out
}

// held counts the jobs process 0 holds without handling (WORKER_HOLD_AFTER).
func (fl *fleet) held() int {
	data, err := os.ReadFile(fl.holdLog)
	if err != nil && !os.IsNotExist(err) {
		fl.t.Fatal(err)
	}
	return bytes.Count(data, []byte("\n"))
}

// handledBy counts the jobs process i has logged so far.
func (fl *fleet) handledBy(i int) int {
	data, err := os.ReadFile(fl.logs[i])
	if err != nil && !os.IsNotExist(err) {
		fl.t.Fatal(err)
	}
	return bytes.Count(data, []byte("\n"))
}

// waitDrained waits until the queue has no pending job.
func waitDrained(t *testing.T, q *sqlqueue.Queue, within time.Duration) {
	t.Helper()
	var n int
	if !testutil.WaitFor(within, func() bool {
		var err error
		if n, err = q.Len(t.Context(), ""); err != nil {
			t.Fatalf("Len: %v", err)
		}
		return n == 0
	}) {
		t.Fatalf("%d jobs still pending after %v", n, within)
	}
}

func pushJobs(t *testing.T, q *sqlqueue.Queue, n int) []string {
	t.Helper()
	vs := make([]procJob, n)
	for i := range vs {
		vs[i] = procJob{i}
	}
	if stored, err := queue.DispatchMany(t.Context(), q, vs); err != nil || stored != n {
		t.Fatalf("DispatchMany = %d, %v; want %d", stored, err, n)
	}
	page, err := q.ListJobs(t.Context(), driver.JobFilter{State: queue.StateReady, Limit: 1})
	if err != nil || len(page.Jobs) != 1 {
		t.Fatalf("ListJobs: %v", err)
	}
	var ids []string
	for after := ""; ; {
		page, err := q.ListJobs(t.Context(), driver.JobFilter{State: queue.StateReady, Limit: 500, After: after})
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range page.Jobs {
			ids = append(ids, j.ID)
		}
		if page.Next == "" {
			return ids
		}
		after = page.Next
	}
}

// checkHandled asserts every job was handled and no job was held by two
// handlers at once.
func checkHandled(t *testing.T, ids []string, got map[string][]handling) (duplicates int) {
	t.Helper()
	for _, id := range ids {
		hs := got[id]
		if len(hs) == 0 {
			t.Errorf("job %s was never handled", id)
			continue
		}
		duplicates += len(hs) - 1
		for i := range hs {
			for k := i + 1; k < len(hs); k++ {
				if hs[i].start < hs[k].end && hs[k].start < hs[i].end {
					t.Errorf("job %s held by processes %d and %d at once", id, hs[i].proc, hs[k].proc)
				}
			}
		}
	}
	return duplicates
}

// TestProcesses has four worker processes share one database and handle
// 20,000 jobs: every job handled, none by two processes at once.
func TestProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts worker processes; skipped with -short")
	}
	eachDialect(t, func(t *testing.T, b backend) {
		s := newStore(t, b)
		q := s.queue(t)
		const n = 20000
		ids := pushJobs(t, q, n)
		fl := startFleet(t, b, s, 4, time.Minute, 0)
		waitDrained(t, q, 3*time.Minute)
		fl.stop()
		got := fl.handled()
		if dups := checkHandled(t, ids, got); dups != 0 {
			t.Errorf("%d jobs handled more than once without any crash", dups)
		}
		if dead, err := q.DeadLetters(t.Context(), "", 10); err != nil || len(dead) != 0 {
			t.Errorf("dead letters %v, %v; want none", dead, err)
		}
	})
}

// TestProcessKilled kills one of two worker processes with SIGKILL mid-run:
// its jobs are re-delivered after their lease and none is lost. The test
// proves a re-delivery happened: the victim handles 20 jobs, then holds
// every further job it starts until it is killed, and is killed only once
// it holds one, so the survivor must handle at least one job on a second
// or later attempt (the survivor's own leases are 1 s, extended by its
// Worker, over 20 ms handlers).
func TestProcessKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("starts worker processes; skipped with -short")
	}
	eachDialect(t, func(t *testing.T, b backend) {
		s := newStore(t, b)
		q := s.queue(t)
		const n = 2000
		ids := pushJobs(t, q, n)
		fl := startFleet(t, b, s, 2, time.Second, 20*time.Millisecond, "WORKER_HOLD_AFTER=20")
		// Kill only once the victim holds a job: on a loaded machine its
		// start can lag the survivor's by seconds, and a victim killed
		// while it holds nothing proves nothing.
		var left int
		if !testutil.WaitFor(time.Minute, func() bool {
			if fl.held() > 0 {
				return true
			}
			var err error
			if left, err = q.Len(t.Context(), ""); err != nil {
				t.Fatal(err)
			}
			if left == 0 {
				t.Fatalf("the queue drained before the victim process held a job (it handled %d)", fl.handledBy(0))
			}
			return false
		}) {
			t.Fatalf("the victim held no job within a minute: %d of %d left, it handled %d", left, n, fl.handledBy(0))
		}
		victim := fl.procs[0]
		if err := victim.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		_ = victim.Wait()
		waitDrained(t, q, 2*time.Minute)
		fl.stop()
		got := fl.handled()
		checkHandled(t, ids, got)
		redelivered := 0
		for _, hs := range got {
			for _, h := range hs {
				if h.proc == 1 && h.attempt > 1 {
					redelivered++
				}
			}
		}
		if redelivered == 0 {
			t.Errorf("the survivor handled no job on a later attempt: the killed process held no job when it was killed, so the test proved nothing")
		}
		t.Logf("%d jobs of the killed process re-delivered to the survivor", redelivered)
		if dead, err := q.DeadLetters(t.Context(), "", 10); err != nil || len(dead) != 0 {
			t.Errorf("dead letters %v, %v; want none", dead, err)
		}
	})
}
