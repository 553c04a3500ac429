package sqlqueue_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/meridianjobs/meridian/internal/testutil"
	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/sqlqueue"
)

// The partition and stall cases of the fault suite (issue 25): worker A
// runs a job, then loses the store (its connection frozen by a test-owned
// relay, or SQLite's write lock held by another connection) while worker B
// keeps it. An overlap is a handler still running, between its own start
// and end records, when a handler of the other process starts the same job
// (or, under a Concurrency limit of 1, takes the same slot). There must be
// none: A's handler is cancelled a margin before what A last stored
// expires, whatever A's store calls are doing.

// stallHold is the job the cases run.
type stallHold struct{ N int }

// span is one handler run, as the handler records it.
type span struct {
	proc, job  string
	start, end time.Time // end zero while it runs
	cause      error
}

// spans records the handler runs of both processes.
type spans struct {
	mu  sync.Mutex
	all []*span
}

func (s *spans) begin(proc, job string) *span {
	sp := &span{proc: proc, job: job, start: time.Now()}
	s.mu.Lock()
	s.all = append(s.all, sp)
	s.mu.Unlock()
	return sp
}

func (s *spans) finish(sp *span, cause error) {
	s.mu.Lock()
	sp.end, sp.cause = time.Now(), cause
	s.mu.Unlock()
}

// of returns copies of proc's spans.
func (s *spans) of(proc string) []span {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []span
	for _, sp := range s.all {
		if sp.proc == proc {
			out = append(out, *sp)
		}
	}
	return out
}

// ended reports whether proc has a span that ended.
func (s *spans) ended(proc string) bool {
	for _, sp := range s.of(proc) {
		if !sp.end.IsZero() {
			return true
		}
	}
	return false
}

// overlaps lists the handler runs of one process still running when the
// other process started the same job (bySlot: any job, all of them
// sharing one slot).
func overlaps(a, b []span, bySlot bool) []string {
	var out []string
	for _, x := range a {
		for _, y := range b {
			if !bySlot && x.job != y.job {
				continue
			}
			if y.start.After(x.start) && (x.end.IsZero() || y.start.Before(x.end)) {
				out = append(out, fmt.Sprintf("%s's %s ran until %s, %s's %s started at %s",
					x.proc, x.job, x.end.Format(time.StampMilli), y.proc, y.job, y.start.Format(time.StampMilli)))
			}
		}
	}
	return out
}

// stallMode is what the processes contend for.
type stallMode struct {
	name  string
	jobs  int
	lease time.Duration // the job lease
	slot  time.Duration // a Concurrency(1) slot's expiry; 0: none
	hold  time.Duration // how long A's lease or slot holds from its last renewal
}

var stallModes = []stallMode{
	// One job under a 2 s lease: B is given the job once A's lease expires.
	{name: "job", jobs: 1, lease: 2 * time.Second, hold: 2 * time.Second},
	// Two jobs under one slot of 2 s and a long job lease: B takes the
	// slot once A's slot expires, long before A's job lease would.
	{name: "slot", jobs: 2, lease: 10 * time.Second, slot: 2 * time.Second, hold: 2 * time.Second},
}

// stallWorker runs a worker as process proc on q whose handlers run for
// run unless their context ends, recording their spans; it returns a
// function that stops it. With once, the worker stops reserving as its
// first handler starts (and lets it run as long as it will): once cut off,
// A must not take the job back from B when the store returns.
func stallWorker(t *testing.T, q queue.Queue, proc string, m stallMode, run time.Duration, rec *spans, once bool) func() {
	t.Helper()
	w := queue.NewWorker(q).Slog(slog.New(slog.DiscardHandler)).Concurrency(1).Poll(20 * time.Millisecond).
		Lease(m.lease).ShutdownTimeout(time.Minute)
	if m.slot > 0 {
		// Each process has a queue of its own; the jobs of both share the
		// slot (one key per job name).
		w.Queues(proc)
		lim, err := queue.NewLimiter(q, nil)
		if err != nil {
			t.Fatal(err)
		}
		mw, err := lim.Concurrency(queue.KeyByName, 1, m.slot, 20*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		w.Use(mw)
	}
	queue.Handle(w, func(ctx context.Context, _ stallHold) error {
		j, _ := queue.JobFromContext(ctx)
		sp := rec.begin(proc, j.ID)
		if once {
			w.Stop()
		}
		t := time.NewTimer(run)
		defer t.Stop()
		select {
		case <-ctx.Done():
			rec.finish(sp, context.Cause(ctx))
			return ctx.Err()
		case <-t.C:
			rec.finish(sp, nil)
			return nil
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			cancel()
			<-done
		}
	}
	t.Cleanup(stop)
	return stop
}

// stallCase runs one case: A (on qA) runs a job; cut() takes the store
// away from A; B (on qB) starts; restore() gives it back. locked says the
// cut stops B too (SQLite's write lock): then the store is given back once
// A's handler ended, and B goes on from there.
func stallCase(t *testing.T, m stallMode, qA, qB queue.Queue, cut, restore func(), locked bool) {
	for i := range m.jobs {
		j := mustJob(t, stallHold{i}, fmt.Sprintf("hold-%d", i))
		if m.slot > 0 {
			j.Queue = string(rune('A' + i)) // the queue of process A, then B's
		}
		if err := qB.Push(t.Context(), j); err != nil {
			t.Fatal(err)
		}
	}
	var rec spans
	stopA := stallWorker(t, qA, "A", m, 30*time.Second, &rec, true)
	if !testutil.WaitFor(10*time.Second, func() bool { return len(rec.of("A")) > 0 }) {
		t.Fatal("A did not start a job")
	}
	cut()
	cutAt := time.Now()
	restored := false
	defer func() {
		if !restored {
			restore()
		}
	}()
	stopB := stallWorker(t, qB, "B", m, 100*time.Millisecond, &rec, false)
	// A's handler must end by what A last stored (at most the hold from
	// now) minus the margin; the bound adds a second for a loaded machine.
	bound := m.hold + time.Second
	if locked {
		if !testutil.WaitFor(bound, func() bool { return rec.ended("A") }) {
			t.Errorf("A's handler still runs %s after the store was locked (its %s lease or slot could not be renewed)", bound, m.hold)
		}
		restore()
		restored = true
	}
	if !testutil.WaitFor(3*m.hold+5*time.Second, func() bool { return len(rec.of("B")) > 0 }) {
		t.Fatal("B did not start a job while A was cut off")
	}
	if !locked {
		restore()
		restored = true
	}
	if !testutil.WaitFor(3*m.hold+5*time.Second, func() bool { return rec.ended("B") }) {
		t.Fatal("B's handler did not end")
	}
	stopB()
	stopA()
	a, b := rec.of("A"), rec.of("B")
	if o := overlaps(a, b, m.slot > 0); len(o) > 0 {
		t.Errorf("%d overlaps: %v", len(o), o)
	}
	if len(a) == 0 || a[0].end.IsZero() || !errors.Is(a[0].cause, queue.ErrLeaseLost) {
		t.Errorf("A's first handler run %+v, want it ended with ErrLeaseLost", a)
	} else {
		if took := a[0].end.Sub(cutAt); took > bound {
			t.Errorf("A's handler ended %s after the cut, want within %s", took, bound)
		}
		t.Logf("A's handler ended %s after the cut; B started %s after it", a[0].end.Sub(cutAt).Round(time.Millisecond), b[0].start.Sub(a[0].end).Round(time.Millisecond))
	}
}

func mustJob(t *testing.T, v any, id string) queue.Job {
	t.Helper()
	j, err := queue.NewJob(v)
	if err != nil {
		t.Fatal(err)
	}
	j.ID = id
	return j
}

// TestPartitionConnectionFrozen freezes worker A's connections to
// PostgreSQL and MariaDB through a test-owned relay (issue 25 items 1 and
// 3: B started the job, or took the slot, seconds before A's handler
// ended).
func TestPartitionConnectionFrozen(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		d      sqlqueue.Dialect
		driver string
		env    string
	}{
		{sqlqueue.Postgres, "pgx", "MERIDIAN_POSTGRES_DSN"},
		{sqlqueue.MySQL, "mysql", "MERIDIAN_MYSQL_DSN"},
	} {
		for _, m := range stallModes {
			t.Run(string(tc.d)+"/"+m.name, func(t *testing.T) {
				t.Parallel()
				b := serverBackend(t, tc.d, tc.driver, tc.env)
				s := newStore(t, b)
				qB := s.queue(t)
				dsn := testutil.DSN(t, tc.env)
				relay := testutil.NewRelay(t, serverAddr(t, tc.d, dsn))
				dbA, err := sql.Open(tc.driver, relayedDSN(t, tc.d, dsn, relay.Addr()))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { dbA.Close() })
				qA, err := sqlqueue.New(dbA, sqlqueue.WithTable(s.table))
				if err != nil {
					t.Fatal(err)
				}
				stallCase(t, m, qA, qB, relay.Freeze, relay.Resume, false)
			})
		}
	}
}

// serverAddr returns the host:port of a DSN.
func serverAddr(t *testing.T, d sqlqueue.Dialect, dsn string) string {
	t.Helper()
	if d == sqlqueue.MySQL {
		cfg, err := mysql.ParseDSN(dsn)
		if err != nil {
			t.Fatal(err)
		}
		return cfg.Addr
	}
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}

// TestPartitionSQLiteWriteLockHeld holds SQLite's write lock from another
// connection while worker A runs a job (issue 25 items 1 and 3).
func TestPartitionSQLiteWriteLockHeld(t *testing.T) {
	t.Parallel()
	for _, m := range stallModes {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			b := sqliteBackend()
			s := newStore(t, b)
			qA, qB := s.queue(t), s.queue(t)
			conn, err := b.open(t, s.path+"?_pragma=busy_timeout(10000)").Conn(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			lock := func() {
				if _, err := conn.ExecContext(t.Context(), "BEGIN IMMEDIATE"); err != nil {
					t.Fatal(err)
				}
			}
			unlock := func() {
				if _, err := conn.ExecContext(context.Background(), "ROLLBACK"); err != nil {
					t.Error(err)
				}
			}
			stallCase(t, m, qA, qB, lock, unlock, true)
		})
	}
}
