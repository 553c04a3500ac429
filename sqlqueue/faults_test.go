package sqlqueue_test

import (
	"bytes"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/meridianjobs/meridian/internal/testutil"
	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/sqlqueue"
)

// The fault suite runs real worker processes (testdata/faultworker) over
// SQLite, PostgreSQL and MariaDB while it SIGKILLs them and restarts the
// database server, then judges what happened from the handlers' own
// records, not from the queue: jobs lost, jobs run twice, two live
// processes running one job at once, and how long a killed process's jobs
// took to run again. A poison job whose handler exits the process must end
// as the one dead letter.
//
// The servers it restarts are its own, on ports of their own: a
// PostgreSQL cluster made with pg_createcluster (restarted with
// pg_ctlcluster), a mariadbd on a data directory of its own (killed with
// SIGKILL and started again). Without those programs it skips, and fails
// under CI=true. MERIDIAN_FAULTS=long runs 20,000 jobs per driver instead
// of CI's 1,500.

// Work and Poison are faultworker's job types (the routing key is the type
// name).
type (
	Work   struct{ N int }
	Poison struct{}
)

// faultSize is one run's size.
type faultSize struct {
	jobs, kills, restarts int
	deadline              time.Duration
}

func faultSizeFromEnv() faultSize {
	if os.Getenv("MERIDIAN_FAULTS") == "long" {
		return faultSize{jobs: 20000, kills: 60, restarts: 3, deadline: 20 * time.Minute}
	}
	return faultSize{jobs: 1500, kills: 22, restarts: 2, deadline: 3 * time.Minute}
}

// The workers' settings: the lease bounds how soon a killed process's jobs
// run again, the poll how soon an idle worker looks.
const (
	faultProcs       = 3
	faultConcurrency = 8
	faultLease       = 2 * time.Second
	faultPoll        = 100 * time.Millisecond
	// faultSleep is a Work job's length: long enough that a process found
	// running a job is still running it when the kill lands, and that the
	// backlog lasts while the kills are paced by its progress (a slice of
	// the jobs per kill, looked at every few tens of milliseconds).
	faultSleep     = 40 * time.Millisecond
	poisonAttempts = 3
	workAttempts   = 25 // far more than the crashes any one job can be caught in
	// redeliverySlack is what the re-delivery check allows beyond the lease
	// and the poll: scheduling on a loaded machine. A job that lost its
	// place in the queue waits for the rest of the backlog instead (before
	// SQLite 0003 and MySQL 0004), which the kills spread over the run.
	redeliverySlack = 2 * time.Second
)

var (
	faultOnce sync.Once
	faultBin  string
	faultErr  error
)

// buildFaultWorker builds testdata/faultworker once per test binary run;
// TestMain removes it.
func buildFaultWorker(t *testing.T) string {
	t.Helper()
	faultOnce.Do(func() {
		dir, err := os.MkdirTemp("", "sqlqueue-faultworker")
		if err != nil {
			faultErr = err
			return
		}
		bin := filepath.Join(dir, "faultworker")
		out, err := exec.Command("go", "build", "-o", bin, "./testdata/faultworker").CombinedOutput()
		if err != nil {
			faultErr = fmt.Errorf("building testdata/faultworker: %v\n%s", err, out)
			return
		}
		faultBin = bin
	})
	if faultErr != nil {
		t.Fatal(faultErr)
	}
	return faultBin
}

// faultServer is the database one fault run works on.
type faultServer struct {
	dialect        sqlqueue.Dialect
	driver, source string
	restart        func(t testing.TB) // nil: nothing to restart (SQLite)
}

const faultsWhy = "the fault suite"

// postgresServer is the fault run's own PostgreSQL (testutil.PostgresServer).
func postgresServer(t *testing.T) *faultServer {
	s := testutil.PostgresServer(t, faultsWhy)
	return &faultServer{dialect: sqlqueue.Postgres, driver: s.Driver, source: s.Source, restart: s.Restart}
}

// mariadbServer is the fault run's own MariaDB (testutil.MariaDBServer).
func mariadbServer(t *testing.T) *faultServer {
	s := testutil.MariaDBServer(t, faultsWhy, "64M", "faults")
	return &faultServer{dialect: sqlqueue.MySQL, driver: s.Driver, source: s.Source, restart: s.Restart}
}

// faultProc is one worker process the suite started.
type faultProc struct {
	cmd         *exec.Cmd
	log         string
	killedAt    time.Time // when the suite sent SIGKILL; zero otherwise
	diedAt      time.Time // when Wait returned; zero while it runs
	crashed     bool      // exited with status 3: the poison job
	exitedOddly error     // any other exit before the end
}

// faultFleet starts worker processes and replaces each one that ends
// until stop.
type faultFleet struct {
	t   *testing.T
	bin string
	env []string
	dir string

	mu       sync.Mutex
	procs    []*faultProc
	stopping bool
	wg       sync.WaitGroup

	// What the suite has read of the processes' records so far (owned by
	// the test's goroutine): each file is read from where the last read
	// stopped, so a look costs what was written since, and a process's
	// state can be looked at again just before it is killed.
	logs []procLog
	recs map[string][]attemptRec
	ends int
}

// procLog is what has been read of one process's record.
type procLog struct {
	off  int64
	open map[string]int // job -> index in recs of its attempt started and not ended
}

func (fl *faultFleet) start() {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	if fl.stopping {
		return
	}
	p := &faultProc{log: filepath.Join(fl.dir, fmt.Sprintf("proc-%d.log", len(fl.procs)))}
	p.cmd = exec.Command(fl.bin)
	p.cmd.Env = append(slices.Clone(fl.env), "FAULT_LOG="+p.log)
	stderr, err := os.Create(p.log + ".stderr") // the worker's own log, for a failure's post-mortem
	if err != nil {
		fl.t.Errorf("creating a worker's log: %v", err)
		return
	}
	defer stderr.Close() // the child has its own copy
	p.cmd.Stderr = stderr
	if err := p.cmd.Start(); err != nil {
		fl.t.Errorf("starting a worker process: %v", err)
		return
	}
	fl.procs = append(fl.procs, p)
	fl.wg.Go(func() {
		err := p.cmd.Wait()
		fl.mu.Lock()
		p.diedAt = time.Now()
		var ee *exec.ExitError
		switch {
		case p.killedAt.IsZero() && errors.As(err, &ee) && ee.ExitCode() == 3:
			p.crashed = true
		case !p.killedAt.IsZero() || fl.stopping:
		case err != nil:
			p.exitedOddly = err
		}
		stopping := fl.stopping
		fl.mu.Unlock()
		if !stopping {
			fl.start() // a supervisor restarts what ended
		}
	})
}

// kill sends SIGKILL to p.
func (fl *faultFleet) kill(p *faultProc) {
	fl.mu.Lock()
	p.killedAt = time.Now()
	fl.mu.Unlock()
	_ = p.cmd.Process.Kill()
}

// stop ends every process with SIGTERM and waits for them.
func (fl *faultFleet) stop() {
	fl.mu.Lock()
	fl.stopping = true
	procs := slices.Clone(fl.procs)
	fl.mu.Unlock()
	for _, p := range procs {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
	}
	fl.wg.Wait()
}

// attemptRec is one handler start read from a process's record.
type attemptRec struct {
	proc       int
	start, end int64 // end 0: no end record
	attempt    int
}

// records reads what every process recorded since the last call and
// returns all of it: job ID -> its attempts, and the number of finished
// attempts. The maps are the fleet's own: read them before the next call.
func (fl *faultFleet) records() (map[string][]attemptRec, int) {
	fl.mu.Lock()
	n := len(fl.procs)
	fl.mu.Unlock()
	for i := range n {
		fl.read(i)
	}
	return fl.recs, fl.ends
}

// read reads what process i recorded since the last read. A record is one
// write of a whole line; a line not yet ended is left for the next read.
func (fl *faultFleet) read(i int) {
	if fl.recs == nil {
		fl.recs = map[string][]attemptRec{}
	}
	for len(fl.logs) <= i {
		fl.logs = append(fl.logs, procLog{open: map[string]int{}})
	}
	fl.mu.Lock()
	name := fl.procs[i].log
	fl.mu.Unlock()
	lg := &fl.logs[i]
	f, err := os.Open(name)
	if errors.Is(err, os.ErrNotExist) {
		return
	}
	if err != nil {
		fl.t.Fatal(err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.NewSectionReader(f, lg.off, 1<<40))
	if err != nil {
		fl.t.Fatal(err)
	}
	whole := bytes.LastIndexByte(data, '\n') + 1
	lg.off += int64(whole)
	for line := range strings.Lines(string(data[:whole])) {
		fs := strings.Fields(line)
		switch {
		case len(fs) == 4 && fs[0] == "S":
			at, _ := strconv.ParseInt(fs[2], 10, 64)
			n, _ := strconv.Atoi(fs[3])
			lg.open[fs[1]] = len(fl.recs[fs[1]])
			fl.recs[fs[1]] = append(fl.recs[fs[1]], attemptRec{proc: i, start: at, attempt: n})
		case len(fs) == 3 && fs[0] == "E":
			at, _ := strconv.ParseInt(fs[2], 10, 64)
			if k, ok := lg.open[fs[1]]; ok {
				fl.recs[fs[1]][k].end = at
				delete(lg.open, fs[1])
				fl.ends++
			}
		}
	}
}

// running reports whether process i has a job started and not ended, as
// of its record read just now.
func (fl *faultFleet) running(i int) bool {
	fl.read(i)
	return len(fl.logs[i].open) > 0
}

// victim picks a live process to kill: one running a job, looked at again
// just before it is returned, so the kill leaves a started job to run
// again; any live one once every job has finished; nil when no process
// runs a job now.
func (fl *faultFleet) victim(allDone bool) *faultProc {
	fl.mu.Lock()
	procs := slices.Clone(fl.procs)
	var live []int
	for i, p := range procs {
		if p.diedAt.IsZero() && p.killedAt.IsZero() {
			live = append(live, i)
		}
	}
	fl.mu.Unlock()
	rand.Shuffle(len(live), func(a, b int) { live[a], live[b] = live[b], live[a] })
	for _, i := range live {
		if fl.running(i) {
			return procs[i]
		}
	}
	if allDone && len(live) > 0 {
		return procs[live[0]]
	}
	return nil
}

// TestFaults is the fault suite: see the comment at the top of this file.
func TestFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("the fault suite kills processes and restarts servers; skipped with -short")
	}
	size := faultSizeFromEnv()
	servers := map[string]func(t *testing.T) *faultServer{
		"sqlite": func(t *testing.T) *faultServer {
			return &faultServer{dialect: sqlqueue.SQLite, driver: "sqlite", source: filepath.Join(t.TempDir(), "faults.db")}
		},
		"postgres": postgresServer,
		"mysql":    mariadbServer,
	}
	for _, name := range []string{"sqlite", "postgres", "mysql"} {
		t.Run(name, func(t *testing.T) {
			bin := buildFaultWorker(t)
			faultRun(t, servers[name](t), bin, size)
		})
	}
}

func faultRun(t *testing.T, srv *faultServer, bin string, size faultSize) {
	ctx := t.Context()
	table := testutil.Name("faults")
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

	jobs := make([]queue.Job, size.jobs)
	ids := make([]string, size.jobs)
	for i := range jobs {
		if jobs[i], err = queue.NewJob(Work{i}, queue.MaxAttempts(workAttempts)); err != nil {
			t.Fatal(err)
		}
		jobs[i].ID = fmt.Sprintf("work-%06d", i)
		ids[i] = jobs[i].ID
	}
	if n, err := queue.PushMany(ctx, q, jobs); err != nil || n != size.jobs {
		t.Fatalf("PushMany = %d, %v", n, err)
	}
	// The poison job becomes ready a moment into the run, ahead of the
	// backlog, when the workers' prefetch buffers are full.
	poisonID, _, err := queue.Enqueue(ctx, q, Poison{}, queue.MaxAttempts(poisonAttempts), queue.Priority(1), queue.Delay(time.Second))
	if err != nil {
		t.Fatal(err)
	}

	fl := &faultFleet{t: t, bin: bin, dir: t.TempDir(), env: append(os.Environ(),
		"FAULT_DRIVER="+srv.driver, "FAULT_SOURCE="+srv.source, "FAULT_TABLE="+table,
		"FAULT_LEASE="+faultLease.String(), "FAULT_POLL="+faultPoll.String(), "FAULT_SLEEP="+faultSleep.String(),
		"FAULT_CONCURRENCY="+strconv.Itoa(faultConcurrency))}
	began := time.Now()
	for range faultProcs {
		fl.start()
	}
	defer fl.stop()

	// Kill a process each time another slice of the jobs has finished, and
	// restart the server at points between kills; both wait for progress,
	// never for time. A restart runs beside the kills (the workers go on
	// while it takes its seconds, and the kills keep pace with them). The
	// run ends when the queue holds nothing pending.
	if srv.restart == nil {
		size.restarts = 0
	}
	step := max(1, size.jobs/(size.kills+2))
	restartAt := make([]int, size.restarts)
	for i := range restartAt {
		restartAt[i] = size.jobs*(i+1)/(size.restarts+1) + step/2
	}
	var restartWindows [][2]time.Time
	var restartFrom time.Time
	var restartDone func() bool // non-nil while a restart runs
	var restartWait func()
	next, kills, restarts := step, 0, 0
	if !testutil.WaitFor(time.Until(began.Add(size.deadline)), func() bool {
		_, done := fl.records()
		switch {
		case restartDone != nil && restartDone():
			restartWait()
			restartWindows = append(restartWindows, [2]time.Time{restartFrom, time.Now()})
			restartDone, restartWait = nil, nil
			restarts++
		case restartDone == nil && restarts < size.restarts && done >= restartAt[restarts]:
			restartFrom = time.Now()
			restartDone, restartWait = testutil.Background(t, srv.restart)
		}
		if kills < size.kills && done >= next {
			if p := fl.victim(done >= size.jobs); p != nil {
				fl.kill(p)
				kills++
				next += step
			}
		}
		if kills >= size.kills && restarts >= size.restarts {
			n, err := q.Len(ctx, "")
			return err == nil && n == 0
		}
		return false
	}) {
		n, _ := q.Len(ctx, "")
		t.Fatalf("the run did not finish within %v: %d jobs pending, %d kills, %d restarts", size.deadline, n, kills, restarts)
	}
	fl.stop()
	elapsed := time.Since(began)

	recs, _ := fl.records()
	fl.mu.Lock()
	procs := slices.Clone(fl.procs)
	fl.mu.Unlock()
	crashes := 0
	for _, p := range procs {
		if p.crashed {
			crashes++
		}
		if p.exitedOddly != nil {
			t.Logf("a worker process ended with %v (a restart of the server can make one fail to start; it was replaced)", p.exitedOddly)
		}
	}

	// The store's view: every Work job done, the poison job the one dead letter.
	dead, err := q.DeadLetters(ctx, "", 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(dead) != 1 || dead[0].Name != "Poison" {
		var names []string
		for _, d := range dead {
			names = append(names, d.Name+" ("+d.LastError+")")
		}
		t.Errorf("dead letters %v; want the poison job alone", names)
	} else if dead[0].ID != poisonID || !strings.Contains(dead[0].LastError, "allows 3 attempts") {
		t.Errorf("the poison job was dead-lettered with %q; want attempts exhausted", dead[0].LastError)
	}

	// The handlers' view.
	var lost, duplicates, overlaps, overcount int
	var redelivery []time.Duration
	var killTimes []time.Time
	for _, p := range procs {
		if !p.killedAt.IsZero() {
			killTimes = append(killTimes, p.killedAt)
		}
	}
	// redeliveryBound is how long after the kill at from a job may take
	// to start again at to: its lease expires within faultLease and a
	// worker looks within faultPoll; each later kill in between may have
	// hit the process that took the job before it started it (the job then
	// waits out that lease too). A server restart in between is not judged:
	// it delays the job by its own length.
	redeliveryBound := func(from, to time.Time) (time.Duration, bool) {
		for _, w := range restartWindows {
			if w[0].Before(to) && from.Before(w[1]) {
				return 0, false
			}
		}
		n := 1
		for _, k := range killTimes {
			if k.After(from) && k.Before(to) {
				n++
			}
		}
		return time.Duration(n)*(faultLease+faultPoll) + redeliverySlack, true
	}
	poisonStarts := len(recs[poisonID])
	for _, id := range ids {
		rs := recs[id]
		ended := 0
		for _, r := range rs {
			if r.end != 0 {
				ended++
			}
		}
		if ended == 0 {
			lost++
			t.Errorf("job %s: no handler of it ever finished", id)
		}
		if ended > 1 {
			duplicates += ended - 1
		}
		// Overlap: two attempts whose holders were both alive at once. An
		// attempt without an end lasted until its process died.
		until := func(r attemptRec) int64 {
			if r.end != 0 {
				return r.end
			}
			return procs[r.proc].diedAt.UnixNano()
		}
		for i := range rs {
			for k := i + 1; k < len(rs); k++ {
				if rs[i].start < until(rs[k]) && rs[k].start < until(rs[i]) {
					overlaps++
					t.Errorf("job %s ran in processes %d and %d at once", id, rs[i].proc, rs[k].proc)
				}
			}
		}
		// Re-delivery: from the kill of a process that ran the job to the
		// job's next start.
		for i, r := range rs {
			killed := procs[r.proc].killedAt
			if r.end != 0 || killed.IsZero() || i+1 >= len(rs) {
				continue
			}
			d := time.Duration(rs[i+1].start - killed.UnixNano())
			redelivery = append(redelivery, d)
			if bound, ok := redeliveryBound(killed, time.Unix(0, rs[i+1].start)); ok && d > bound {
				t.Errorf("job %s ran again %v after the kill of the process that ran it; want at most %v (the lease %v and the poll %v per kill meanwhile, + %v slack)",
					id, d, bound, faultLease, faultPoll, redeliverySlack)
			}
		}
		info, err := q.GetJob(ctx, id)
		if err != nil {
			t.Errorf("GetJob(%s): %v", id, err)
			continue
		}
		if info.State != queue.StateDone {
			t.Errorf("job %s is %s, want done", id, info.State)
		}
		overcount += max(0, info.Attempts-len(rs))
	}
	if kills < 20 {
		t.Errorf("%d kills, want at least 20", kills)
	}
	if crashes == 0 || poisonStarts == 0 || poisonStarts > poisonAttempts {
		t.Errorf("the poison job started %d times and crashed %d processes; want 1 to %d of each", poisonStarts, crashes, poisonAttempts)
	}
	// An attempt counts only once its handler started: a job's attempts
	// exceed its starts only for the jobs a process had claimed for its
	// idle handlers, or counted the start of, and not yet started when it
	// died (at most its concurrency), or whose claim or start a server
	// restart left unanswered. The prefetched jobs a process held never
	// count.
	// A restart can leave each process's claim and its Start call in
	// flight unanswered.
	if bound := (kills + crashes + 2*restarts*faultProcs) * faultConcurrency; overcount > bound {
		t.Errorf("jobs were charged %d attempts they never started; at most %d can be (concurrency %d times %d deaths and unanswered calls)",
			overcount, bound, faultConcurrency, kills+crashes+2*restarts*faultProcs)
	}
	slices.Sort(redelivery)
	var p50, pmax time.Duration
	if len(redelivery) > 0 {
		p50, pmax = redelivery[len(redelivery)/2], redelivery[len(redelivery)-1]
	}
	// The kills that found their process running a job: each leaves a
	// started job to run again, which is what the suite is about.
	midJob := 0
	for i, p := range procs {
		if !p.killedAt.IsZero() && len(fl.logs[i].open) > 0 {
			midJob++
		}
	}
	if len(redelivery) == 0 || midJob < kills/2 {
		t.Errorf("%d of %d kills found their process running a job (%d jobs run again after one); want at least half: the kills proved too little",
			midJob, kills, len(redelivery))
	}

	t.Logf("faults %s: %d jobs, %d kills (%d mid-job), %d poison crashes, %d server restarts in %v; lost %d, duplicates %d, overlaps %d, "+
		"attempts charged without a start %d; re-delivery after a kill (%d jobs) p50 %v, max %v (lease %v, poll %v)",
		srv.dialect, size.jobs, kills, midJob, crashes, restarts, elapsed.Round(time.Second), lost, duplicates, overlaps, overcount,
		len(redelivery), p50.Round(time.Millisecond), pmax.Round(time.Millisecond), faultLease, faultPoll)
}
