package sqlqueue

import (
	"database/sql"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/meridianjobs/meridian/internal/testutil"
	queue "github.com/meridianjobs/meridian/queue/driver"
)

// claimPlanLimit is how many jobs each claim of TestClaimPlans asks for,
// and claimPlanReads the most rows of the jobs table it may read: the
// due jobs of its queues (a claim over several queues sorts theirs; on
// MariaDB each is counted twice, as an index condition attempt and a
// read), the jobs it changes, the seeks of the priorities, and slack; far
// below the jobs scheduled ahead (claimPlanScheduled per priority and
// queue, five times that once the table has grown).
const (
	claimPlanLimit     = 30
	claimPlanDue       = 40
	claimPlanScheduled = 2000
	claimPlanReads     = 400
)

// TestClaimPlans checks on every SQL store that a claim and the look for
// a ready job (hasReady, SQLite's probe before its write lock) read the
// due jobs they need and not the jobs scheduled ahead, whatever the
// statistics: missing (a table never analyzed), fresh (analyzed) and
// stale (analyzed, then five times the scheduled jobs pushed). Each of
// queues q0 to q2 holds claimPlanDue due jobs at priority 0 and
// claimPlanScheduled jobs scheduled hours ahead at priorities 5 and 0
// (the first read by every claim whose scan orders by priority first,
// the second by every claim that finds fewer due jobs than it asks for);
// each scenario claims claimPlanLimit jobs from q1 and from q0, q1 and
// q2, so q1 runs out of due jobs on the way (the idle poll's case).
//
// What is checked is the rows read, counted by each store's own means:
// PostgreSQL explains the claim statement with ANALYZE (in a transaction
// rolled back; an index condition's rejections go uncounted there, so
// every scan of the claim index bounding run_at must also fix the
// priority), MariaDB counts the handler reads (and index condition
// attempts) of the session around a real Reserve and hasReady, and SQLite, which counts nothing a client
// can read, must search the claim index with run_at as a bound in the
// plan of every claim read.
func TestClaimPlans(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		open  func(t *testing.T) (*sql.DB, *Queue)
		reads func(t *testing.T, db *sql.DB, q *Queue, queues []string) (int64, int64)
	}{
		{"sqlite", func(t *testing.T) (*sql.DB, *Queue) {
			db, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "plan.db"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			q, err := New(db, WithTable("plans"))
			if err != nil {
				t.Fatal(err)
			}
			if err := q.Setup(t.Context()); err != nil {
				t.Fatal(err)
			}
			return db, q
		}, sqliteClaimReads},
		{"postgres", func(t *testing.T) (*sql.DB, *Queue) {
			return planQueue(t, "pgx", testutil.PostgresEnv, "cplans_")
		}, pgClaimReads},
		{"mysql", func(t *testing.T) (*sql.DB, *Queue) {
			db, q := planQueue(t, "mysql", testutil.MySQLEnv, "cplans_")
			// One connection, so that the session's handler counters
			// are those of the claim's statements.
			db.SetMaxOpenConns(1)
			return db, q
		}, mysqlClaimReads},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			db, q := tc.open(t)
			now := time.Now()
			fill := func(scheduled int) {
				t.Helper()
				var js []queue.Job
				for _, name := range []string{"q0", "q1", "q2", "q3"} {
					for i := range scheduled {
						ahead := now.Add(time.Hour + time.Duration(i)*time.Second)
						js = append(js,
							queue.Job{Queue: name, Name: "Job", Payload: []byte("{}"), Priority: 5, AvailableAt: ahead},
							queue.Job{Queue: name, Name: "Job", Payload: []byte("{}"), AvailableAt: ahead})
					}
				}
				for len(js) > 0 {
					n := min(len(js), 1000)
					if _, err := q.PushMany(ctx, js[:n]); err != nil {
						t.Fatal(err)
					}
					js = js[n:]
				}
			}
			var due []queue.Job
			for _, name := range []string{"q0", "q1", "q2", "q3"} {
				for i := range claimPlanDue {
					due = append(due, queue.Job{Queue: name, Name: "Job", Payload: []byte("{}"), AvailableAt: now.Add(-time.Duration(i+1) * time.Second)})
				}
			}
			if _, err := q.PushMany(ctx, due); err != nil {
				t.Fatal(err)
			}
			fill(claimPlanScheduled)
			analyze := "ANALYZE " + q.t.jobs
			if tc.name == "mysql" {
				analyze = "ANALYZE TABLE " + q.t.jobs
			}
			for _, sc := range []struct {
				name  string
				setup func()
			}{
				{"missing", func() {}},
				{"fresh", func() {
					if _, err := db.ExecContext(ctx, analyze); err != nil {
						t.Fatal(err)
					}
				}},
				{"stale", func() { fill(4 * claimPlanScheduled) }},
			} {
				sc.setup()
				for _, queues := range [][]string{{"q1"}, {"q0", "q1", "q2"}} {
					claim, ready := tc.reads(t, db, q, queues)
					if claim > claimPlanReads || ready > claimPlanReads {
						t.Errorf("%s statistics, queues %v: a claim read %d rows of the jobs table, a look for a ready job %d; want at most %d",
							sc.name, queues, claim, ready, claimPlanReads)
					}
				}
			}
		})
	}
}

// mysqlClaimReads runs a Reserve and a hasReady over queues on q, whose
// pool has one connection, and returns the handler reads of each (index
// condition attempts included).
func mysqlClaimReads(t *testing.T, db *sql.DB, q *Queue, queues []string) (int64, int64) {
	ctx := t.Context()
	reads := func() int64 {
		// Index entries an index condition rejects inside InnoDB count
		// as ICP attempts, not as reads.
		rows, err := db.QueryContext(ctx, "SHOW SESSION STATUS WHERE Variable_name LIKE 'Handler_read%' OR Variable_name = 'Handler_icp_attempts'")
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var n int64
		for rows.Next() {
			var name string
			var v int64
			if err := rows.Scan(&name, &v); err != nil {
				t.Fatal(err)
			}
			n += v
		}
		return n
	}
	before := reads()
	got, err := q.Reserve(ctx, queues, claimPlanLimit, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	mid := reads()
	if _, err := q.hasReady(ctx, queues); err != nil {
		t.Fatal(err)
	}
	after := reads()
	t.Logf("queues %v: claimed %d, handler reads %d, hasReady %d", queues, len(got), mid-before, after-mid)
	return mid - before, after - mid
}

// pgClaimReads explains the claim statement over queues with ANALYZE in
// a transaction rolled back, and the looks for a ready job of each
// priority, and returns the rows of the jobs table their plans read.
func pgClaimReads(t *testing.T, db *sql.DB, q *Queue, queues []string) (int64, int64) {
	now := time.Now()
	claim := pgExplainReads(t, db, q, queues, q.stmtN(qClaim, len(queues)), pgClaimArgs(queues, claimPlanLimit, now, now.Add(time.Hour), "t", claimCount{fresh: 1, recovered: 1}, "w", nil))
	var ready int64
	for _, prio := range []int64{5, 0} {
		ready += pgExplainReads(t, db, q, queues, q.stmtN(qHasReady, len(queues)), append(queueArgs(queues), prio, micros(now), micros(now)))
	}
	return claim, ready
}

// pgExplainReads explains query over queues with ANALYZE in a transaction
// rolled back and returns the rows of the jobs table its plan read,
// failing the test when the plan scans the table or bounds run_at in the
// claim index under no one priority.
func pgExplainReads(t *testing.T, db *sql.DB, q *Queue, queues []string, query string, args []any) int64 {
	t.Helper()
	ctx := t.Context()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	var out string
	if err := tx.QueryRowContext(ctx, "EXPLAIN (ANALYZE, FORMAT JSON) "+query, args...).Scan(&out); err != nil {
		t.Fatalf("%v\n%s", err, query)
	}
	var plan any
	if err := json.Unmarshal([]byte(out), &plan); err != nil {
		t.Fatal(err)
	}
	n, seq, unbounded := pgRowsRead(plan, q.t.raw, q.t.raw+"_claim")
	if seq || unbounded {
		t.Errorf("queues %v: the plan scans the jobs table (%v) or bounds run_at in the claim index under no one priority (%v):\n%s", queues, seq, unbounded, out)
	}
	return n
}

// pgRowsRead sums, over the nodes of an EXPLAIN ANALYZE plan that read
// table, the rows they returned and removed by filter, times their loops;
// seq reports a sequential scan of table, and unbounded a scan of the
// claim index whose condition on run_at comes with no equality on
// priority: a scan that run_at cannot end, whose entries the index
// condition rejects one by one without counting them in the plan.
func pgRowsRead(plan any, table, claimIndex string) (n int64, seq, unbounded bool) {
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case []any:
			for _, e := range x {
				walk(e)
			}
		case map[string]any:
			if x["Relation Name"] == table && x["Node Type"] != "ModifyTable" {
				loops, _ := x["Actual Loops"].(float64)
				rows, _ := x["Actual Rows"].(float64)
				removed, _ := x["Rows Removed by Filter"].(float64)
				n += int64((rows + removed) * loops)
				if x["Node Type"] == "Seq Scan" {
					seq = true
				}
			}
			if cond, _ := x["Index Cond"].(string); x["Index Name"] == claimIndex && strings.Contains(cond, "run_at") && !strings.Contains(cond, "priority = ") {
				unbounded = true
			}
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(plan)
	return n, seq, unbounded
}

// sqliteClaimReads checks the plans of the reads of SQLite's claim and of
// its look for a ready job over queues: every one searches the claim
// index, and those that read jobs bound run_at in the search. It returns
// no count (SQLite has none a client can read): zero, or the limit past
// the bound when a plan fails.
func sqliteClaimReads(t *testing.T, db *sql.DB, q *Queue, queues []string) (int64, int64) {
	ctx := t.Context()
	now := micros(time.Now())
	plan := func(query string, args []any) []string {
		t.Helper()
		rows, err := db.QueryContext(ctx, "EXPLAIN QUERY PLAN "+query, args...)
		if err != nil {
			t.Fatalf("%v\n%s", err, query)
		}
		defer rows.Close()
		var out []string
		for rows.Next() {
			var id, parent, unused int
			var detail string
			if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
				t.Fatal(err)
			}
			out = append(out, detail)
		}
		return out
	}
	var bad [2]int64
	for k, c := range []struct {
		what  string
		query string
		args  []any
		bound string
	}{
		{"top priority", q.stmt(qClaimTop), []any{queues[0]}, "queue=?"},
		{"next priority", q.stmt(qClaimNext), []any{queues[0], 5}, "priority<?"},
		{"claim read", q.stmtN(qClaimSelect, len(queues)), append(queueArgs(queues), 0, now, now, claimPlanLimit), "run_at<?"},
		{"look for a ready job", q.stmtN(qHasReady, len(queues)), append(queueArgs(queues), 0, now, now), "run_at<?"},
	} {
		p := plan(c.query, c.args)
		if !slices.ContainsFunc(p, func(d string) bool {
			return strings.Contains(d, "INDEX plans_claim") && strings.Contains(d, c.bound) && !strings.Contains(d, "SCAN plans ")
		}) {
			t.Errorf("queues %v: the plan of the %s %q does not search the claim index bounded by %s", queues, c.what, p, c.bound)
			bad[min(k/3, 1)] = claimPlanReads + 1
		}
	}
	if _, err := q.Reserve(ctx, queues, claimPlanLimit, time.Hour); err != nil {
		t.Fatal(err)
	}
	return bad[0], bad[1]
}
