package sqlqueue_test

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/meridianjobs/meridian/internal/testutil"
	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/sqlqueue"
)

// previousRelease is the commit of the release before the store counted
// itself on every dialect (MySQL counted in Go, SQLite's pushes counted
// their inserts): the rolling-upgrade test runs a worker built from it.
const previousRelease = "d37f4f0"

// upgradeLoad is the program the previous release's worker runs: it
// pushes jobs to two queues (some to run an hour later, in scheduled
// buckets) and works them (one in four always fails and is dead-lettered
// after two attempts, one in four fails once), keeping finished jobs, until
// SIGTERM; then it stops pushing, lets its worker finish and prints how
// many jobs it pushed. Any push or setup error ends it with status 1. It
// uses only API that the previous release and this one share.
const upgradeLoad = `package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite"

	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/sqlqueue"
)

type upJob struct{ N int }

func main() {
	driver := flag.String("driver", "", "")
	dsn := flag.String("dsn", "", "")
	table := flag.String("table", "", "")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	db, err := sql.Open(*driver, *dsn)
	if err != nil {
		fail(err)
	}
	q, err := sqlqueue.New(db, sqlqueue.WithTable(*table), sqlqueue.WithRetention(time.Hour, time.Hour))
	if err != nil {
		fail(err)
	}
	if err := q.Setup(ctx); err != nil {
		fail(err)
	}
	var seen sync.Map
	w := queue.NewWorker(q).Concurrency(8).MaxAttempts(2).Backoff(time.Millisecond).Queues("up-a", "up-b").Slog(slog.New(slog.DiscardHandler))
	w.Register("upJob", func(ctx context.Context, j queue.Job) error {
		var v upJob
		if err := json.Unmarshal(j.Payload, &v); err != nil {
			return err
		}
		_, again := seen.LoadOrStore(j.ID, true)
		if v.N%4 == 0 || (v.N%4 == 1 && !again) {
			return errors.New("boom")
		}
		return nil
	})
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	pushed := 0
	for n := 0; ctx.Err() == nil; n++ {
		vs := make([]upJob, 10)
		for i := range vs {
			vs[i] = upJob{N: n*10 + i}
		}
		opts := []queue.Option{queue.OnQueue([]string{"up-a", "up-b"}[n%2])}
		if n%3 == 0 {
			opts = append(opts, queue.Delay(time.Hour))
		}
		k, err := queue.DispatchMany(context.WithoutCancel(ctx), q, vs, opts...)
		if err != nil {
			fail(err)
		}
		pushed += k
		select {
		case <-ctx.Done():
		case <-time.After(5 * time.Millisecond):
		}
	}
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
		fail(err)
	}
	fmt.Printf("pushed %d\n", pushed)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "upgradeload:", err)
	os.Exit(1)
}
`

// TestRollingUpgrade upgrades a store from the previous release while
// its worker runs, following docs/operations.md ("Upgrading"): on
// PostgreSQL, whose counting did not change, the old worker keeps pushing
// and working while a process of this release migrates and works beside
// it; on SQLite and MySQL, whose counting moved into triggers (migrations
// 0012 and 0018), the old worker is stopped first, then this release
// migrates and works. Then, with a worker of this release running, the
// tables go one version down and up again. Afterwards every job pushed is
// in the table and the counts table equals the jobs table, per queue and
// state and per scheduled bucket.
func TestRollingUpgrade(t *testing.T) {
	bin := buildPreviousRelease(t)
	eachDialect(t, func(t *testing.T, b backend) {
		ctx := t.Context()
		s := newStore(t, b)
		driver, dsn := "sqlite", s.path
		switch b.dialect {
		case sqlqueue.Postgres:
			driver, dsn = "pgx", os.Getenv("MERIDIAN_POSTGRES_DSN")
		case sqlqueue.MySQL:
			driver, dsn = "mysql", os.Getenv("MERIDIAN_MYSQL_DSN")
		}
		watch := b.open(t, s.path+"?_pragma=busy_timeout(10000)")
		if b.dialect != sqlqueue.SQLite {
			watch = b.open(t, "")
		}
		finished := func() int64 {
			var n int64
			err := watch.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+s.table+" WHERE state <> 'pending'").Scan(&n)
			if err != nil && !strings.Contains(err.Error(), "exist") && !strings.Contains(err.Error(), "no such table") {
				t.Fatal(err)
			}
			return n
		}

		old := startOld(t, bin, driver, dsn, s.table)
		testutil.Eventually(t, time.Minute, func() bool { return finished() >= 20 || old.exited() }, "the old worker finished no jobs")
		if old.exited() {
			t.Fatalf("the old worker ended early: %s", old.stderr())
		}
		stopsFirst := b.dialect != sqlqueue.Postgres // docs/operations.md: the counting switch
		if stopsFirst {
			old.stop(t)
		}

		// A process of this release migrates (Setup) and works.
		q, db := s.open(t, sqlqueue.WithRetention(time.Hour, time.Hour))
		latest, err := sqlqueue.LatestSchemaVersion(b.dialect)
		if err != nil {
			t.Fatal(err)
		}
		if v, _, err := q.SchemaVersions(ctx); err != nil || v != latest {
			t.Fatalf("after Setup: version %d, %v; want %d", v, err, latest)
		}
		wq, _ := s.open(t, sqlqueue.WithRetention(time.Hour, time.Hour))
		load := startLoad(t, wq)
		at := finished()
		testutil.Eventually(t, time.Minute, func() bool { return finished() >= at+20 || load.failed() }, "this release's worker finished no jobs")
		load.check(t)
		if !stopsFirst {
			old.stop(t)
		}

		// One version down and up again, this release's worker running.
		if _, v, err := q.MigrateDown(ctx, latest-1); err != nil || v != latest-1 {
			t.Fatalf("MigrateDown(%d) = %d, %v", latest-1, v, err)
		}
		at = finished()
		testutil.Eventually(t, time.Minute, func() bool { return finished() >= at+20 || load.failed() }, "no jobs finished at version %d", latest-1)
		load.check(t)
		if err := q.Setup(ctx); err != nil {
			t.Fatal(err)
		}
		at = finished()
		testutil.Eventually(t, time.Minute, func() bool { return finished() >= at+20 || load.failed() }, "no jobs finished after migrating up again")
		load.check(t)
		pushed := load.stop(t) + old.pushed

		var stored int64
		if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+s.table).Scan(&stored); err != nil {
			t.Fatal(err)
		}
		if stored != int64(pushed) {
			t.Errorf("the table holds %d jobs, %d were pushed", stored, pushed)
		}
		t.Logf("%d jobs pushed (%d by %s), %d stored", pushed, old.pushed, previousRelease, stored)
		checkCountsTable(t, db, s.table, "after the upgrade, down and up")
		checkBuckets(t, db, s.table, "after the upgrade, down and up")
	})
}

// checkCountsTable compares the counts table's states (the sums over
// shards) with the jobs table, per queue and state.
func checkCountsTable(t *testing.T, db *sql.DB, table, when string) {
	t.Helper()
	have := queryCounts(t, db, "SELECT queue, state, SUM(n) FROM "+table+"_counts WHERE state NOT LIKE 'at:%' GROUP BY queue, state HAVING SUM(n) <> 0")
	want := queryCounts(t, db, "SELECT queue, state, COUNT(*) FROM "+table+" GROUP BY queue, state")
	if !maps.Equal(have, want) {
		t.Errorf("%s: counts %v, the table holds %v", when, have, want)
	}
}

// buildPreviousRelease builds upgradeLoad against previousRelease, checked
// out with git worktree into a temporary directory, and returns the
// binary. Without the repository's history the test is skipped (it fails
// under CI=true, which runs on a full clone).
func buildPreviousRelease(t *testing.T) string {
	t.Helper()
	absent := func(format string, args ...any) {
		t.Helper()
		if testutil.CI() {
			t.Fatalf(format, args...)
		}
		t.Skipf(format, args...)
	}
	if _, err := exec.LookPath("git"); err != nil {
		absent("no git to check out %s: %v", previousRelease, err)
	}
	top, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		absent("not in a git repository, so no %s to build: %v", previousRelease, err)
	}
	root := strings.TrimSpace(string(top))
	if err := exec.Command("git", "-C", root, "cat-file", "-e", previousRelease+"^{commit}").Run(); err != nil {
		absent("commit %s is not in this clone's history (a shallow clone?): %v", previousRelease, err)
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	run := func(name string, args ...string) {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
	}
	run("git", "worktree", "add", "--detach", src, previousRelease)
	t.Cleanup(func() {
		_ = exec.Command("git", "-C", root, "worktree", "remove", "--force", src).Run()
		_ = exec.Command("git", "-C", root, "worktree", "prune").Run()
	})
	main := filepath.Join(src, "internal", "upgradeload", "main.go")
	if err := os.MkdirAll(filepath.Dir(main), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(main, []byte(upgradeLoad), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "upgradeload")
	build := exec.Command("go", "build", "-o", bin, "./internal/upgradeload")
	build.Dir = src
	build.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the worker of %s: %v\n%s", previousRelease, err, out)
	}
	return bin
}

// oldWorker is a running upgradeLoad process.
type oldWorker struct {
	cmd    *exec.Cmd
	out    bytes.Buffer
	errOut syncBuffer
	done   chan struct{}
	err    error
	pushed int
}

// syncBuffer is a bytes.Buffer safe for a writer and readers at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func startOld(t *testing.T, bin, driver, dsn, table string) *oldWorker {
	t.Helper()
	w := &oldWorker{done: make(chan struct{})}
	w.cmd = exec.Command(bin, "-driver", driver, "-dsn", dsn, "-table", table)
	w.cmd.Stdout, w.cmd.Stderr = &w.out, &w.errOut
	if err := w.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		w.err = w.cmd.Wait()
		close(w.done)
	}()
	t.Cleanup(func() {
		if !w.exited() {
			_ = w.cmd.Process.Kill()
			<-w.done
		}
	})
	return w
}

func (w *oldWorker) exited() bool {
	select {
	case <-w.done:
		return true
	default:
		return false
	}
}

func (w *oldWorker) stderr() string { return w.errOut.String() }

// stop ends the worker with SIGTERM, as a deployment does, waits for it
// to exit and reads how many jobs it pushed.
func (w *oldWorker) stop(t *testing.T) {
	t.Helper()
	if err := w.cmd.Process.Signal(syscall.SIGTERM); err != nil && !w.exited() {
		t.Fatal(err)
	}
	select {
	case <-w.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("the old worker did not stop within 30 s: %s", w.stderr())
	}
	if w.err != nil {
		t.Fatalf("the old worker: %v: %s", w.err, w.stderr())
	}
	sc := bufio.NewScanner(&w.out)
	for sc.Scan() {
		if n, ok := strings.CutPrefix(sc.Text(), "pushed "); ok {
			w.pushed, _ = strconv.Atoi(n)
			return
		}
	}
	t.Fatalf("the old worker did not say how many jobs it pushed: %s", w.stderr())
}

// load is upgradeLoad's work in this process, with this release.
type load struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	pushed atomic.Int64
	errs   chan error
}

type upJob struct{ N int }

func startLoad(t *testing.T, q *sqlqueue.Queue) *load {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	l := &load{cancel: cancel, errs: make(chan error, 2)}
	var seen sync.Map
	w := queue.NewWorker(q).Concurrency(8).MaxAttempts(2).Backoff(time.Millisecond).Queues("up-a", "up-b").Slog(slog.New(slog.DiscardHandler))
	w.Register("upJob", func(ctx context.Context, j queue.Job) error {
		var v upJob
		if err := json.Unmarshal(j.Payload, &v); err != nil {
			return err
		}
		_, again := seen.LoadOrStore(j.ID, true)
		if v.N%4 == 0 || (v.N%4 == 1 && !again) {
			return errors.New("boom")
		}
		return nil
	})
	l.wg.Add(2)
	go func() {
		defer l.wg.Done()
		if err := w.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
			l.errs <- fmt.Errorf("worker: %w", err)
		}
	}()
	go func() {
		defer l.wg.Done()
		for n := 0; ctx.Err() == nil; n++ {
			vs := make([]upJob, 10)
			for i := range vs {
				vs[i] = upJob{N: n*10 + i}
			}
			opts := []queue.Option{queue.OnQueue([]string{"up-a", "up-b"}[n%2])}
			if n%3 == 0 {
				opts = append(opts, queue.Delay(time.Hour))
			}
			k, err := queue.DispatchMany(context.WithoutCancel(ctx), q, vs, opts...)
			if err != nil {
				l.errs <- fmt.Errorf("push: %w", err)
				return
			}
			l.pushed.Add(int64(k))
			select {
			case <-ctx.Done():
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(l.halt)
	return l
}

// failed reports whether the load met an error (stop reports it).
func (l *load) failed() bool { return len(l.errs) > 0 }

func (l *load) halt() {
	l.cancel()
	l.wg.Wait()
}

// check fails t now if the load met an error.
func (l *load) check(t *testing.T) {
	t.Helper()
	if l.failed() {
		l.stop(t)
		t.FailNow()
	}
}

// stop ends the load, fails t on any error it met and returns how many
// jobs it pushed.
func (l *load) stop(t *testing.T) int {
	t.Helper()
	l.halt()
	close(l.errs)
	for err := range l.errs {
		t.Error(err)
	}
	return int(l.pushed.Load())
}
