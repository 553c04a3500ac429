package sqlqueue_test

import (
	"context"
	"database/sql"
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

// actions records the leader actions of one process: each between its own
// start and end, as a log's start and end lines would.
type actions struct {
	mu    sync.Mutex
	spans [][2]time.Time
}

// act runs leader actions of length d until the term is over.
func (a *actions) act(ctx context.Context, d time.Duration) {
	for queue.Leading(ctx) == nil {
		start := time.Now()
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
		a.mu.Lock()
		a.spans = append(a.spans, [2]time.Time{start, time.Now()})
		a.mu.Unlock()
	}
}

func (a *actions) all() [][2]time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([][2]time.Time(nil), a.spans...)
}

// overlap returns how long spans of a and b overlap in all.
func overlap(a, b [][2]time.Time) time.Duration {
	var total time.Duration
	for _, x := range a {
		for _, y := range b {
			s, e := x[0], x[1]
			if y[0].After(s) {
				s = y[0]
			}
			if y[1].Before(e) {
				e = y[1]
			}
			if e.After(s) {
				total += e.Sub(s)
			}
		}
	}
	return total
}

// relayedDSN returns dsn with its server address replaced by addr.
func relayedDSN(t *testing.T, d sqlqueue.Dialect, dsn, addr string) string {
	t.Helper()
	if d == sqlqueue.MySQL {
		cfg, err := mysql.ParseDSN(dsn)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Addr = addr
		return cfg.FormatDSN()
	}
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = addr
	return u.String()
}

// TestLeaderConnectionFrozen freezes the connection of the leading process
// through a test-owned TCP relay for several TTLs (issue 25 item 2: two
// leaders for 7-8 s): the leader must end its term before the other
// process takes over, so the two never act at once.
func TestLeaderConnectionFrozen(t *testing.T) {
	for _, tc := range []struct {
		d         sqlqueue.Dialect
		driver    string
		env, dflt string
	}{
		{sqlqueue.Postgres, "pgx", "MERIDIAN_POSTGRES_DSN", "127.0.0.1:5432"},
		{sqlqueue.MySQL, "mysql", "MERIDIAN_MYSQL_DSN", "127.0.0.1:3306"},
	} {
		t.Run(string(tc.d), func(t *testing.T) {
			t.Parallel()
			b := serverBackend(t, tc.d, tc.driver, tc.env)
			s := newStore(t, b)
			qB := s.queue(t)
			dsn := testutil.DSN(t, tc.env)
			var target string
			if tc.d == sqlqueue.MySQL {
				cfg, err := mysql.ParseDSN(dsn)
				if err != nil {
					t.Fatal(err)
				}
				target = cfg.Addr
			} else {
				u, err := url.Parse(dsn)
				if err != nil {
					t.Fatal(err)
				}
				target = u.Host
			}
			relay := testutil.NewRelay(t, target)
			dbA, err := sql.Open(tc.driver, relayedDSN(t, tc.d, dsn, relay.Addr()))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { dbA.Close() })
			qA, err := sqlqueue.New(dbA, sqlqueue.WithTable(s.table))
			if err != nil {
				t.Fatal(err)
			}

			const ttl, renew = 2 * time.Second, 400 * time.Millisecond
			var actsA, actsB actions
			newLeader := func(q queue.Queue, holder string, acts *actions) *queue.Leader {
				l, err := queue.NewLeader(q, "lead", queue.LeaderHolder(holder), queue.LeaderTTL(ttl), queue.LeaderRenew(renew),
					queue.LeaderLogger(slog.New(slog.DiscardHandler)), queue.OnElected(func(ctx context.Context) { acts.act(ctx, 20*time.Millisecond) }))
				if err != nil {
					t.Fatal(err)
				}
				return l
			}
			a, bl := newLeader(qA, "A", &actsA), newLeader(qB, "B", &actsB)
			ctx, cancel := context.WithCancel(t.Context())
			var wg sync.WaitGroup
			defer func() { relay.Resume(); cancel(); wg.Wait() }()
			wg.Go(func() { _ = a.Run(ctx) })
			if !testutil.WaitFor(10*time.Second, a.IsLeader) {
				t.Fatal("A did not become the leader")
			}
			wg.Go(func() { _ = bl.Run(ctx) })
			if !testutil.WaitFor(2*ttl, func() bool { return len(actsA.all()) > 5 }) {
				t.Fatal("A does not act")
			}
			relay.Freeze()
			frozen := time.Now()
			if !testutil.WaitFor(3*ttl, bl.IsLeader) {
				t.Fatal("B did not take over while A's connection was frozen")
			}
			if a.IsLeader() {
				t.Error("A still leads while B leads")
			}
			took := time.Since(frozen)
			if !testutil.WaitFor(2*ttl, func() bool { return len(actsB.all()) > 5 }) {
				t.Fatal("B does not act")
			}
			relay.Resume()
			// A's stuck renewal goes through now, or fails: either way
			// it must not lead while B does.
			if testutil.WaitFor(2*renew, a.IsLeader) {
				t.Error("A leads again after the relay resumed, while B holds the lease")
			}
			cancel()
			wg.Wait()
			if o := overlap(actsA.all(), actsB.all()); o > 0 {
				t.Errorf("A and B acted as leader at once for %s", o)
			}
			t.Logf("B took over %s after the freeze (TTL %s)", took.Round(time.Millisecond), ttl)
		})
	}
}

// TestLeaderSQLiteWriteLockHeld holds SQLite's write lock from another
// connection for several TTLs while a process leads (issue 25 item 2: the
// stuck renewal went through later and the old leader carried on): the
// leader's term ends at its margin while its renewal waits for the lock,
// and the two processes never act at once.
func TestLeaderSQLiteWriteLockHeld(t *testing.T) {
	t.Parallel()
	b := sqliteBackend()
	s := newStore(t, b)
	qA, qB := s.queue(t), s.queue(t)
	const ttl, renew = time.Second, 200 * time.Millisecond
	var actsA, actsB actions
	newLeader := func(q queue.Queue, holder string, acts *actions) *queue.Leader {
		l, err := queue.NewLeader(q, "lead", queue.LeaderHolder(holder), queue.LeaderTTL(ttl), queue.LeaderRenew(renew),
			queue.LeaderLogger(slog.New(slog.DiscardHandler)), queue.OnElected(func(ctx context.Context) { acts.act(ctx, 10*time.Millisecond) }))
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	a, bl := newLeader(qA, "A", &actsA), newLeader(qB, "B", &actsB)
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	wg.Go(func() { _ = a.Run(ctx) })
	if !testutil.WaitFor(10*time.Second, a.IsLeader) {
		t.Fatal("A did not become the leader")
	}
	wg.Go(func() { _ = bl.Run(ctx) })
	if !testutil.WaitFor(2*ttl, func() bool { return len(actsA.all()) > 5 }) {
		t.Fatal("A does not act")
	}
	// Another process takes the write lock and keeps it.
	lockDB := b.open(t, s.path)
	conn, err := lockDB.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(t.Context(), "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	locked := time.Now()
	if !testutil.WaitFor(2*ttl, func() bool { return !a.IsLeader() }) {
		t.Error("A still leads a TTL after the write lock was taken")
	}
	if ended := time.Since(locked); ended > ttl+renew {
		t.Errorf("A's term ended %s after the lock was taken, want within the TTL", ended)
	}
	// The lock is held for two TTLs more: the scenario's length, not a
	// wait for a condition.
	hold := time.NewTimer(2 * ttl)
	<-hold.C
	if _, err := conn.ExecContext(context.Background(), "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	if !testutil.WaitFor(5*ttl, func() bool { return a.IsLeader() || bl.IsLeader() }) {
		t.Fatal("nobody leads after the lock was released")
	}
	if !testutil.WaitFor(2*ttl, func() bool { return len(actsA.all())+len(actsB.all()) > 20 }) {
		t.Fatal("nobody acts after the lock was released")
	}
	cancel()
	wg.Wait()
	if o := overlap(actsA.all(), actsB.all()); o > 0 {
		t.Errorf("A and B acted as leader at once for %s", o)
	}
}
