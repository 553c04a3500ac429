package sqlqueue_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meridianjobs/meridian/internal/testutil"
	queue "github.com/meridianjobs/meridian/queue/driver"
	"github.com/meridianjobs/meridian/sqlqueue"
)

// gatedDB is a database handle that counts the job insertions run on it,
// can hold the first one until released (so Pushes pile up behind a busy
// lane) and can fail the next insertion of more than one row.
type gatedDB struct {
	*sql.DB
	table string

	inserts   atomic.Int64
	rows      sync.Mutex
	perInsert []int // rows of each insertion, in order

	hold      chan struct{} // closed to release the held insertion; nil: hold none
	held      chan struct{} // closed once an insertion is held
	holdOnce  sync.Once
	failMulti atomic.Bool // fail the next insertion of several rows
}

var errInjected = errors.New("injected: the store refused the insertion")

// insertion reports whether query inserts jobs, and how many.
func (g *gatedDB) insertion(query string, args []any) (int, bool) {
	if !strings.Contains(query, "INSERT INTO ") || !strings.Contains(query, g.table) ||
		!strings.Contains(query, "(id, queue, name, payload") {
		return 0, false
	}
	return len(args) / 15, true
}

func (g *gatedDB) before(ctx context.Context, query string, args []any) error {
	n, ok := g.insertion(query, args)
	if !ok {
		return nil
	}
	g.inserts.Add(1)
	g.rows.Lock()
	g.perInsert = append(g.perInsert, n)
	g.rows.Unlock()
	if n > 1 && g.failMulti.CompareAndSwap(true, false) {
		return errInjected
	}
	if g.hold != nil {
		first := false
		g.holdOnce.Do(func() { first = true })
		if first {
			close(g.held)
			select {
			case <-g.hold:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	return nil
}

func (g *gatedDB) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if err := g.before(ctx, query, args); err != nil {
		return nil, err
	}
	return g.DB.ExecContext(ctx, query, args...)
}

func (g *gatedDB) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if err := g.before(ctx, query, args); err != nil {
		return nil, err
	}
	return g.DB.QueryContext(ctx, query, args...)
}

func (g *gatedDB) sizes() []int {
	g.rows.Lock()
	defer g.rows.Unlock()
	return append([]int(nil), g.perInsert...)
}

// groupedQueue opens a store and a second Queue on it through a gatedDB
// that holds its first insertion, with one push lane.
func groupedQueue(t *testing.T, open func(t *testing.T) backend, opts ...sqlqueue.Option) (*sqlqueue.Queue, *gatedDB, *sqlqueue.Queue) {
	t.Helper()
	s := newStore(t, open(t))
	plain, db := s.open(t)
	g := &gatedDB{DB: db, table: s.table, hold: make(chan struct{}), held: make(chan struct{})}
	q, err := sqlqueue.New(g, append([]sqlqueue.Option{sqlqueue.WithTable(s.table), sqlqueue.WithPushLanes(1)}, opts...)...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = q.Close() })
	return q, g, plain
}

// pushAsync runs q.Push(ctx, j) on a goroutine of its own.
func pushAsync(ctx context.Context, q *sqlqueue.Queue, j queue.Job) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- q.Push(ctx, j) }()
	return ch
}

// TestGroupPush: Pushes that arrive while the push lane is busy go to the
// store as one insertion, each answered as if it had run alone.
func TestGroupPush(t *testing.T) {
	for d, open := range backends(t) {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			q, g, plain := groupedQueue(t, open)
			ctx := t.Context()
			if err := plain.Push(ctx, queue.Job{ID: "held-by-another", Queue: "q", Name: "n"}); err != nil {
				t.Fatal(err)
			}

			first := pushAsync(ctx, q, queue.Job{Queue: "q", Name: "first"})
			<-g.held // the lane is busy until g.hold closes

			cancelled, cancel := context.WithCancel(ctx)
			jobs := []queue.Job{
				{Queue: "q", Name: "plain"},
				{ID: "given-id", Queue: "q", Name: "with an ID"},
				{Queue: "q", Name: "keyed", UniqueKey: "k"},
				{Queue: "q", Name: "keyed again", UniqueKey: "k"},
				{ID: "held-by-another", Queue: "q", Name: "an active job's ID"},
				{ID: "gave-up", Queue: "q", Name: "cancelled while waiting"},
			}
			errs := make([]<-chan error, len(jobs))
			for i, j := range jobs {
				c := ctx
				if j.ID == "gave-up" {
					c = cancelled
				}
				errs[i] = pushAsync(c, q, j)
				// One at a time, so the batch keeps their order (the
				// second keyed push is the duplicate).
				testutil.Eventually(t, 5*time.Second, func() bool { return sqlqueue.PushesWaiting(q) == i+1 }, "push %d did not wait", i)
			}
			cancel()
			if err := <-errs[5]; !errors.Is(err, context.Canceled) {
				t.Fatalf("a push cancelled while waiting returned %v, want context.Canceled", err)
			}
			close(g.hold)
			if err := <-first; err != nil {
				t.Fatalf("the lane's push: %v", err)
			}
			for i, want := range []error{nil, nil, nil, queue.ErrDuplicate, queue.ErrDuplicate} {
				err := <-errs[i]
				if (want == nil) != (err == nil) || (want != nil && !errors.Is(err, want)) {
					t.Fatalf("push %d (%s): %v, want %v", i, jobs[i].Name, err, want)
				}
			}
			if sizes := g.sizes(); len(sizes) != 2 || sizes[0] != 1 || sizes[1] != 5 {
				t.Fatalf("insertions of %v rows, want [1 5]: the lane's push, then the five still waiting as one", sizes)
			}
			var dup *queue.DuplicateError
			if err := q.Push(ctx, queue.Job{ID: "held-by-another", Queue: "q", Name: "n"}); !errors.As(err, &dup) || dup.ExistingID != "held-by-another" {
				t.Fatalf("a push alone of an active job's ID: %v", err)
			}
			if _, err := plain.GetJob(ctx, "gave-up"); !errors.Is(err, queue.ErrNotFound) {
				t.Fatalf("the job of the push cancelled while waiting: %v, want not found", err)
			}
			if _, err := plain.GetJob(ctx, "given-id"); err != nil {
				t.Fatalf("the job with a given ID: %v", err)
			}
			c, err := plain.Counts(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if got := pendingIn(c, "q"); got != 5 {
				t.Fatalf("%d jobs pending, want 5 (one before, the lane's, plain, with an ID, keyed)", got)
			}
		})
	}
}

// TestGroupPushFailedBatch: when the store refuses a batch, its jobs are
// pushed one by one, each answered on its own.
func TestGroupPushFailedBatch(t *testing.T) {
	for d, open := range backends(t) {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			q, g, plain := groupedQueue(t, open)
			ctx := t.Context()
			g.failMulti.Store(true)
			first := pushAsync(ctx, q, queue.Job{Queue: "q", Name: "first"})
			<-g.held
			var errs []<-chan error
			for i := range 4 {
				errs = append(errs, pushAsync(ctx, q, queue.Job{Queue: "q", Name: fmt.Sprint("waiting ", i)}))
				testutil.Eventually(t, 5*time.Second, func() bool { return sqlqueue.PushesWaiting(q) == i+1 }, "push %d did not wait", i)
			}
			close(g.hold)
			if err := <-first; err != nil {
				t.Fatal(err)
			}
			for i, ch := range errs {
				if err := <-ch; err != nil {
					t.Fatalf("push %d after its batch failed: %v", i, err)
				}
			}
			if sizes := g.sizes(); fmt.Sprint(sizes) != "[1 4 1 1 1 1]" {
				t.Fatalf("insertions of %v rows, want [1 4 1 1 1 1]: the refused batch, then each alone", sizes)
			}
			c, err := plain.Counts(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if got := pendingIn(c, "q"); got != 5 {
				t.Fatalf("%d jobs pending, want 5", got)
			}
		})
	}
}

func TestWithPushLanesLimits(t *testing.T) {
	t.Parallel()
	db, err := sql.Open("sqlite", ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, n := range []int{-1, sqlqueue.MaxPushLanes + 1} {
		if _, err := sqlqueue.New(db, sqlqueue.WithPushLanes(n)); err == nil {
			t.Errorf("WithPushLanes(%d) accepted", n)
		}
	}
	for _, n := range []int{0, 1, sqlqueue.MaxPushLanes} {
		if _, err := sqlqueue.New(db, sqlqueue.WithPushLanes(n)); err != nil {
			t.Errorf("WithPushLanes(%d): %v", n, err)
		}
	}
}

// pendingIn is the Pending count of queue name in c.
func pendingIn(c []queue.QueueCounts, name string) int64 {
	for _, qc := range c {
		if qc.Queue == name {
			return qc.Pending
		}
	}
	return 0
}

// TestGroupPushConnectionFrozen: with the lane's push stuck on a frozen
// connection (a test-owned TCP relay that stops forwarding), every Push
// waiting behind it returns when its context ends, nothing holds a lane
// afterwards, and once the connection is back Pushes go through and
// Close returns.
func TestGroupPushConnectionFrozen(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		d           sqlqueue.Dialect
		driver, env string
	}{
		{sqlqueue.Postgres, "pgx", "MERIDIAN_POSTGRES_DSN"},
		{sqlqueue.MySQL, "mysql", "MERIDIAN_MYSQL_DSN"},
	} {
		t.Run(string(tc.d), func(t *testing.T) {
			t.Parallel()
			s := newStore(t, serverBackend(t, tc.d, tc.driver, tc.env))
			s.queue(t) // makes the tables
			dsn := testutil.DSN(t, tc.env)
			relay := testutil.NewRelay(t, serverAddr(t, tc.d, dsn))
			db, err := sql.Open(tc.driver, relayedDSN(t, tc.d, dsn, relay.Addr()))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			q, err := sqlqueue.New(db, sqlqueue.WithTable(s.table), sqlqueue.WithPushLanes(1))
			if err != nil {
				t.Fatal(err)
			}
			if err := q.Push(t.Context(), queue.Job{Queue: "q", Name: "before"}); err != nil {
				t.Fatalf("a push before the freeze: %v", err)
			}

			relay.Freeze()
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
			defer cancel()
			errs := []<-chan error{pushAsync(ctx, q, queue.Job{Queue: "q", Name: "lane"})}
			for i := range 3 {
				errs = append(errs, pushAsync(ctx, q, queue.Job{Queue: "q", Name: "waiting"}))
				testutil.Eventually(t, 5*time.Second, func() bool { return sqlqueue.PushesWaiting(q) == i+1 }, "push %d did not wait", i)
			}
			for i, ch := range errs {
				select {
				case err := <-ch:
					if !errors.Is(err, context.DeadlineExceeded) {
						t.Errorf("push %d on a frozen connection: %v, want an error matching context.DeadlineExceeded", i, err)
					}
				case <-time.After(30 * time.Second):
					t.Fatalf("push %d did not return 28 s after its context ended", i)
				}
			}
			relay.Resume()
			if err := q.Push(t.Context(), queue.Job{Queue: "q", Name: "after"}); err != nil {
				t.Fatalf("a push after the connection came back: %v", err)
			}
			closed := make(chan error, 1)
			go func() { closed <- q.Close() }()
			select {
			case err := <-closed:
				if err != nil {
					t.Fatalf("Close: %v", err)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("Close waits on a group after every caller gave up")
			}
		})
	}
}
