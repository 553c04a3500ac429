package sqlqueue_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/meridianjobs/meridian/internal/testutil"
	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/sqlqueue"
)

// TestPausePrefetch is the stall case of the jobs a worker reserves ahead
// of its handlers (its prefetch: leases taken through ReserveUnstarted,
// no attempt counted). Process A works short jobs (2 ms) one at a time, so
// it always holds some reserved and not started, and spends most of its
// time in its handler rather than in a write transaction (stopped inside
// one, on SQLite it holds the write lock, and the test resumes and stops
// it again); it is stopped with SIGSTOP,
// and process B drains the queue, taking A's prefetched jobs once their
// leases expire. The rules, judged from the handlers' own records and the
// table:
//
//   - a job A held reserved but had not started costs no attempt: B runs it
//     as its first attempt (at most the one job whose start mark A had
//     sent when it stopped may have counted one);
//   - A, resumed, starts none of the jobs it held unstarted: their leases
//     ran out while it was stopped, and B has run them (a job whose start
//     A had already recorded may still begin its handler after SIGCONT:
//     the handler was called as the process stopped);
//   - no job is lost: each has run to its end in A or B (B runs most of
//     them while A is stopped), and A, resumed, goes on to work new jobs.
//
// Each store runs it twice: under strict order and under a budget
// (balance.Auto), whose Worker reserves on a path of its own.
func TestPausePrefetch(t *testing.T) {
	t.Parallel()
	server := func(d sqlqueue.Dialect, driver, env string) func(t *testing.T) (string, string, *sql.DB, *sqlqueue.Queue) {
		return func(t *testing.T) (string, string, *sql.DB, *sqlqueue.Queue) {
			s := newStore(t, serverBackend(t, d, driver, env))
			q, db := s.open(t)
			return testutil.DSN(t, env), s.table, db, q
		}
	}
	stores := []pauseStore{
		{name: "sqlite", driver: "sqlite", open: func(t *testing.T) (string, string, *sql.DB, *sqlqueue.Queue) {
			s := newStore(t, sqliteBackend())
			return s.path, s.table, probe(t, s.path), s.queue(t)
		}},
		{name: "postgres", driver: "pgx", open: server(sqlqueue.Postgres, "pgx", "MERIDIAN_POSTGRES_DSN"), lockRows: " FOR UPDATE NOWAIT"},
		{name: "mysql", driver: "mysql", open: server(sqlqueue.MySQL, "mysql", "MERIDIAN_MYSQL_DSN"), lockRows: " FOR UPDATE NOWAIT"},
	}
	const jobs = 3000
	for _, st := range stores {
		for _, bal := range []string{"strict", "auto"} {
			t.Run(st.name+"/"+bal, func(t *testing.T) {
				t.Parallel()
				pausePrefetch(t, st, bal, jobs)
			})
		}
	}
}

// pauseStore is a store TestPausePrefetch runs on.
type pauseStore struct {
	name, driver string
	open         func(t *testing.T) (source, table string, db *sql.DB, q *sqlqueue.Queue)
	// lockRows is the probe's clause that takes the selected rows' locks
	// without waiting: a row a stopped process locked (its transaction
	// was in flight) fails the probe. SQLite's probe is its write lock
	// instead.
	lockRows string
}

// pausePrefetch is one run of TestPausePrefetch on st, its workers
// sharing their handlers by bal ("strict", or a budget: "simple", "auto").
func pausePrefetch(t *testing.T, st pauseStore, bal string, jobs int) {
	bin := buildFaultWorker(t)
	source, table, db, q := st.open(t)
	batch := make([]queue.Job, jobs)
	for i := range batch {
		batch[i] = mustJob(t, Work{N: i}, fmt.Sprintf("w-%05d", i))
	}
	if _, err := q.PushMany(t.Context(), batch); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	env := append(os.Environ(), "FAULT_DRIVER="+st.driver, "FAULT_SOURCE="+source, "FAULT_TABLE="+table,
		"FAULT_POLL=20ms", "FAULT_LEASE=2s", "FAULT_SLEEP=2ms")
	if bal != "strict" {
		env = append(env, "FAULT_BALANCE="+bal)
	}
	a := startPauseProc(t, bin, dir, "A", append(slices.Clone(env), "FAULT_CONCURRENCY=1"))
	if !testutil.WaitFor(30*time.Second, func() bool { return a.count(t, "E") >= 100 }) {
		t.Fatalf("A does not work: %s", a.stderr(t))
	}

	// held reads the jobs reserved and not started (no attempt
	// counted yet: every job here starts with none) under the
	// probe's transaction: SQLite's write lock, or the rows'
	// locks taken without waiting. It fails while the stopped A
	// is inside a transaction over them.
	held := func() ([]string, error) {
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		defer cancel()
		conn, err := db.Conn(ctx)
		if err != nil {
			return nil, err
		}
		defer conn.Close()
		begin := "BEGIN"
		if st.name == "sqlite" {
			begin = "BEGIN IMMEDIATE"
		}
		if _, err := conn.ExecContext(ctx, begin); err != nil {
			return nil, err
		}
		defer func() { _, _ = conn.ExecContext(context.Background(), "ROLLBACK") }() // the probe changes nothing
		// Every waiting row is locked, not only the held ones: a
		// row in a transaction of A's (a claim, a start mark, an
		// ack and the counts its triggers change) would stay
		// locked while A is stopped, and B, skipping locked rows,
		// could never drain the queue.
		rows, err := conn.QueryContext(ctx, "SELECT id, lease_token IS NOT NULL AND attempts = 0 FROM "+table+
			" WHERE state = 'pending'"+st.lockRows)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		var ids []string
		for rows.Next() {
			var id string
			var unstarted bool
			if err := rows.Scan(&id, &unstarted); err != nil {
				return nil, err
			}
			if unstarted {
				ids = append(ids, id)
			}
		}
		return ids, rows.Err()
	}
	var buffered []string
	for try := 0; ; try++ {
		a.signal(t, syscall.SIGSTOP)
		ids, err := held()
		if err == nil && len(ids) > 0 {
			buffered = ids
			break
		}
		if try == 40 {
			t.Fatalf("A held no job reserved ahead, or held a lock, each time it was stopped (last: %d jobs, %v)", len(ids), err)
		}
		a.signal(t, syscall.SIGCONT)
		n := a.count(t, "E")
		if !testutil.WaitFor(10*time.Second, func() bool { return a.count(t, "E") > n+10 }) {
			t.Fatal("A does not work after SIGCONT")
		}
	}

	b := startPauseProc(t, bin, dir, "B", append(slices.Clone(env), "FAULT_CONCURRENCY=4"))
	ended := func() map[string]bool {
		out := map[string]bool{}
		for _, p := range []*pauseProc{a, b} {
			for _, r := range p.recs(t) {
				if r.kind == "E" {
					out[r.key] = true
				}
			}
		}
		return out
	}
	// missing describes the jobs of ids that no process ran to
	// its end, as the table has them.
	missing := func(ids []string) string {
		end := ended()
		ph := "?"
		if st.name == "postgres" {
			ph = "$1"
		}
		var left []string
		for _, id := range ids {
			if end[id] {
				continue
			}
			var state string
			var token sql.NullString
			var attempts int
			var exp int64
			err := db.QueryRowContext(t.Context(), "SELECT state, lease_token, attempts, lease_expires_at FROM "+table+" WHERE id = "+ph, id).
				Scan(&state, &token, &attempts, &exp)
			left = append(left, fmt.Sprintf("%s (%s, lease %q, %d attempts, lease expiry in %s; %v)",
				id, state, token.String, attempts, time.Until(time.UnixMicro(exp)).Round(time.Millisecond), err))
		}
		return strings.Join(left, ", ")
	}
	// B is to run every job A held unstarted (their leases expire
	// 2 s after the stop at the latest).
	if !testutil.WaitFor(2*time.Minute, func() bool {
		end := ended()
		return !slices.ContainsFunc(buffered, func(id string) bool { return !end[id] })
	}) {
		t.Fatalf("B did not run the jobs A held unstarted while A was stopped: %s; B: %s", missing(buffered), b.stderr(t))
	}
	// B stops before A resumes, so that whatever A starts after
	// SIGCONT is A's alone to judge.
	b.signal(t, syscall.SIGTERM)
	select {
	case <-b.done:
	case <-time.After(30 * time.Second):
		t.Fatal("B did not stop on SIGTERM")
	}
	a.signal(t, syscall.SIGCONT)
	resumed := time.Now()
	// A job pushed now is reserved after everything A held: once A
	// has run it, A has dealt with its whole prefetch.
	if err := q.Push(t.Context(), mustJob(t, Work{N: -1}, "after")); err != nil {
		t.Fatal(err)
	}
	if !testutil.WaitFor(30*time.Second, func() bool {
		return a.count(t, "E") > 0 && slices.ContainsFunc(a.recs(t), func(r pauseRec) bool { return r.kind == "E" && r.key == "after" })
	}) {
		t.Fatalf("A, resumed, does not work the job pushed after SIGCONT: %s", a.stderr(t))
	}

	// No job is lost: what B had not run when it stopped, A has
	// run by now (it came before "after" in the claim order).
	all := make([]string, jobs)
	for i := range all {
		all[i] = fmt.Sprintf("w-%05d", i)
	}
	if !testutil.WaitFor(30*time.Second, func() bool { return len(ended()) >= jobs+1 }) {
		t.Fatalf("jobs not run to their end by A or B: %s", missing(all))
	}

	startsB := map[string][]int{} // job -> attempts of its starts in B
	for _, r := range recsWithAttempt(t, b.log) {
		startsB[r.id] = append(startsB[r.id], r.attempt)
	}
	// A job whose start A had recorded in the store before the
	// stop (its attempt counted: not in buffered) may have its
	// handler begin, and so its record be dated, after SIGCONT:
	// the handler had been called when the process stopped. A job
	// still unstarted at the stop must never start in A.
	unstarted := map[string]bool{}
	for _, id := range buffered {
		unstarted[id] = true
	}
	var fails []string
	for _, r := range recsWithAttempt(t, a.log) {
		if unstarted[r.id] && !r.at.Before(resumed) {
			fails = append(fails, fmt.Sprintf("A, resumed, started %s (attempt %d), a job it held unstarted while stopped", r.id, r.attempt))
		}
	}
	counted := 0
	for _, id := range buffered {
		att := startsB[id]
		switch {
		case len(att) == 0:
			fails = append(fails, fmt.Sprintf("B never started %s, held by A", id))
		case att[0] != 1:
			counted++
		}
	}
	// The one job whose start mark A had sent as it stopped may
	// have counted its attempt.
	if counted > 1 {
		fails = append(fails, fmt.Sprintf("%d of the %d jobs A held unstarted came to B with an attempt counted", counted, len(buffered)))
	}
	if len(fails) > 0 {
		t.Errorf("%s", strings.Join(fails, "; "))
	}
	t.Logf("A held %d jobs reserved ahead when stopped; B ran them all (%d with an attempt counted)", len(buffered), counted)
}

// startRec is a handler start of faultworker's log: "S id unixnano attempt".
type startRec struct {
	id      string
	at      time.Time
	attempt int
}

func recsWithAttempt(t *testing.T, path string) []startRec {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []startRec
	for line := range strings.Lines(string(b)) {
		fs := strings.Fields(line)
		if len(fs) != 4 || fs[0] != "S" {
			continue
		}
		n, err1 := strconv.ParseInt(fs[2], 10, 64)
		att, err2 := strconv.Atoi(fs[3])
		if err1 != nil || err2 != nil {
			t.Fatalf("start record %q", line)
		}
		out = append(out, startRec{id: fs[1], at: time.Unix(0, n), attempt: att})
	}
	return out
}
