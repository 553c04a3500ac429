package sqlqueue_test

import (
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/meridianjobs/meridian/internal/testutil"
	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/sqlqueue"
)

// The crash loop: one job whose handler exits the process among a dozen
// slow ones, one worker process at a time, restarted a while after each
// crash, as a supervisor would. An attempt counts only when its handler
// starts, and a job taken back from an expired lease runs apart from the
// other such jobs of its process, so the loop narrows onto the poison job:
// it must end with every other job done and the poison job the one dead
// letter.
const (
	loopJobs        = 12
	loopSleep       = 1500 * time.Millisecond
	loopConcurrency = 4
	loopLease       = 2 * time.Second
	loopAttempts    = 3
	loopRestart     = 3 * time.Second
	loopDeadline    = 4 * time.Minute
)

func TestCrashLoop(t *testing.T) {
	if testing.Short() {
		t.Skip("the crash loop runs worker processes for a minute or more; skipped with -short")
	}
	servers := map[string]func(t *testing.T) *faultServer{
		"sqlite": func(t *testing.T) *faultServer {
			return &faultServer{dialect: sqlqueue.SQLite, driver: "sqlite", source: filepath.Join(t.TempDir(), "loop.db")}
		},
		"postgres": postgresServer,
		"mysql":    mariadbServer,
	}
	for _, name := range []string{"sqlite", "postgres", "mysql"} {
		t.Run(name, func(t *testing.T) {
			bin := buildFaultWorker(t)
			crashLoop(t, servers[name](t), bin)
		})
	}
}

func crashLoop(t *testing.T, srv *faultServer, bin string) {
	ctx := t.Context()
	table := testutil.Name("loop")
	db, err := sql.Open(srv.driver, srv.source)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	q, err := sqlqueue.New(db, sqlqueue.WithTable(table), sqlqueue.WithRetention(time.Hour, 24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Setup(ctx); err != nil {
		t.Fatal(err)
	}
	var jobs []queue.Job
	for i := range loopJobs {
		if i == loopJobs/2 {
			p, err := queue.NewJob(Poison{}, queue.MaxAttempts(loopAttempts))
			if err != nil {
				t.Fatal(err)
			}
			p.ID = "poison"
			jobs = append(jobs, p)
		}
		j, err := queue.NewJob(Work{i}, queue.MaxAttempts(loopAttempts))
		if err != nil {
			t.Fatal(err)
		}
		j.ID = fmt.Sprintf("work-%02d", i)
		jobs = append(jobs, j)
	}
	if n, err := queue.PushMany(ctx, q, jobs); err != nil || n != len(jobs) {
		t.Fatalf("PushMany = %d, %v", n, err)
	}

	dir := t.TempDir()
	env := append(os.Environ(),
		"FAULT_DRIVER="+srv.driver, "FAULT_SOURCE="+srv.source, "FAULT_TABLE="+table,
		"FAULT_LEASE="+loopLease.String(), "FAULT_POLL="+faultPoll.String(), "FAULT_SLEEP="+loopSleep.String(),
		"FAULT_CONCURRENCY="+fmt.Sprint(loopConcurrency))
	deadline := time.Now().Add(loopDeadline)
	crashes := 0
	var logs []string
	for run := 0; ; run++ {
		if time.Now().After(deadline) {
			n, _ := q.Len(ctx, "")
			t.Fatalf("the crash loop did not end within %v: %d jobs pending after %d crashes", loopDeadline, n, crashes)
		}
		log := filepath.Join(dir, fmt.Sprintf("proc-%d.log", run))
		logs = append(logs, log)
		cmd := exec.Command(bin)
		cmd.Env = append(slices.Clone(env), "FAULT_LOG="+log)
		stderr, err := os.Create(log + ".stderr")
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		stderr.Close()
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		crashed, finished := false, false
		tick := time.NewTicker(100 * time.Millisecond)
		for !crashed && !finished {
			select {
			case err := <-exited:
				var ee *exec.ExitError
				if !errors.As(err, &ee) || ee.ExitCode() != 3 {
					t.Fatalf("worker process %d ended with %v; want a crash (status 3) of the poison job", run, err)
				}
				crashed = true
			case <-tick.C:
				if n, err := q.Len(ctx, ""); err == nil && n == 0 {
					finished = true
				} else if time.Now().After(deadline) {
					finished = true // judged at the top of the loop
				}
			}
		}
		tick.Stop()
		if finished {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			<-exited
			if n, err := q.Len(ctx, ""); err == nil && n == 0 {
				break
			}
			continue
		}
		crashes++
		// The supervisor restarts the process a while after it crashed.
		select {
		case <-time.After(loopRestart):
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		}
	}

	dead, err := q.DeadLetters(ctx, "", 100)
	if err != nil {
		t.Fatal(err)
	}
	starts := map[string]int{}
	for _, log := range logs {
		b, err := os.ReadFile(log)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
		for line := range strings.Lines(string(b)) {
			if fs := strings.Fields(line); len(fs) == 4 && fs[0] == "S" {
				starts[fs[1]]++
			}
		}
	}
	var names []string
	for _, d := range dead {
		names = append(names, fmt.Sprintf("%s (%d handler starts: %s)", d.ID, starts[d.ID], d.LastError))
	}
	if len(dead) != 1 || dead[0].ID != "poison" {
		t.Fatalf("dead letters %v after %d crashes; want the poison job alone", names, crashes)
	}
	if !strings.Contains(dead[0].LastError, fmt.Sprintf("allows %d attempts", loopAttempts)) {
		t.Errorf("the poison job was dead-lettered with %q; want its attempts exhausted", dead[0].LastError)
	}
	if starts["poison"] != loopAttempts {
		t.Errorf("the poison job's handler started %d times; want %d (an attempt counts when its handler starts)", starts["poison"], loopAttempts)
	}
	t.Logf("crash loop: %d crashes, handler starts per job %v", crashes, starts)
}
