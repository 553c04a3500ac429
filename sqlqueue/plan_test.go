package sqlqueue

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/meridianjobs/meridian/internal/testutil"
	queue "github.com/meridianjobs/meridian/queue/driver"
)

// planRows is the size of TestListPlans' table: large enough that a
// sequential scan is a choice the planner weighs, not a given.
const planRows = 60000

// TestListPlans checks on PostgreSQL that every job list (each state, with
// and without a queue filter, first page and a later one) reads the index
// that orders it, never the whole table, whatever the planner's
// statistics: missing (a table never analyzed), fresh (analyzed), stale
// (analyzed, then a bulk change) and deleted (pg_statistic rows of the
// table removed). The plan of each list query, built as ListJobs builds
// it and explained in ListJobs' read transaction, must hold no Seq Scan
// of the jobs table and an index scan of the list's index, and must not be
// compiled with JIT (a merge that sorts under enable_sort = off costs past
// jit_above_cost: seconds of compiling for a 1 ms query).
func TestListPlans(t *testing.T) {
	ctx := context.Background()
	db, q := planQueue(t, "pgx", testutil.PostgresEnv, "plans_")
	now := time.Now().UnixMicro()
	exec := planExec(t, db, q)
	// The production shape in small: most jobs done, a tenth dead, some
	// ready, many scheduled hours ahead, two priorities, a few running.
	fill := func(from, to int) {
		exec(`INSERT INTO {jobs} (id, queue, name, payload, priority, attempts, max_attempts, timeout_us, unique_key, tags, meta,
  available_at, run_at, created_at, updated_at, finished_at, last_error, lease_token, state)
SELECT 'j' || g, 'q' || (g % 4), 'Job', convert_to('{"n":' || g || '}', 'UTF8'), CASE WHEN g % 10 = 0 THEN 5 ELSE 0 END, 0, 0, 0, NULL, '', '',
  r, r, CAST(? AS BIGINT), CAST(? AS BIGINT), CASE WHEN s = 'pending' THEN 0 ELSE CAST(? AS BIGINT) - g END, '', NULL, s
FROM (SELECT g, CASE WHEN g % 20 < 12 THEN 'done' WHEN g % 20 < 14 THEN 'dead' WHEN g % 20 = 14 THEN 'cancelled' ELSE 'pending' END AS s,
  CASE WHEN g % 20 >= 17 THEN CAST(? AS BIGINT) + g * 1000 ELSE CAST(? AS BIGINT) - g END AS r FROM generate_series(CAST(? AS INT), CAST(? AS INT)) g) x`,
			now, now, now, now+3600e6, now, from, to)
	}
	fill(1, planRows)
	exec("UPDATE {jobs} SET lease_token = 't' || seq, lease_expires_at = CAST(? AS BIGINT) WHERE state = 'pending' AND run_at <= CAST(? AS BIGINT) AND seq % 500 = 0", now+3600e6, now)

	// A worker holds jobs of every queue, so the running lists read them
	// all (a queue nobody holds a job of is not read at all). Written
	// directly, seen an hour ahead: a Heartbeat would run the maintenance
	// pass, which prunes the finished jobs filled above.
	exec(`INSERT INTO {workers} (id, host, pid, queues, concurrency, started_at, last_seen, running)
VALUES ('w', 'h', 1, '[]', 1, CAST(? AS BIGINT), CAST(? AS BIGINT), '{"q0": 10, "q1": 10, "q2": 10, "q3": 10}')`, now, now+3600e6)

	for _, sc := range statsScenarios(exec, q, func() { fill(planRows+1, 2*planRows) }) {
		sc.setup()
		for _, st := range queue.JobStates {
			want := q.t.raw + "_claim"
			if orderOf(st) == byFinish {
				want = q.t.raw + "_list"
			}
			for _, queueName := range []string{"", "q1"} {
				f := queue.JobFilter{State: st, Queue: queueName}
				first, next := explainList(t, q, f, nil)
				checkPlan(t, fmt.Sprintf("%s/%s/queue=%q", sc.name, st, queueName), first, q.t.raw, want)
				if next != nil {
					later, _ := explainList(t, q, f, next)
					checkPlan(t, fmt.Sprintf("%s/%s/queue=%q/page 2", sc.name, st, queueName), later, q.t.raw, want)
				}
			}
		}
		// The reads of finished jobs by finish time, one range of the list
		// index per queue (see finished.go).
		names := []string{"q0", "q1", "q2", "q3"}
		for what, query := range map[string]func() (string, []any){
			"prune": func() (string, []any) { return q.pruneQuery(stateDone, now-1000, names, pruneBatch/len(names)) },
			"DeadSince": func() (string, []any) {
				return q.countFinishedQuery(stateDead, "<", now-1000, names, []int64{1, 10, 100, 1000})
			},
			"CancelledSince": func() (string, []any) { return q.cancelledQuery(now-1000, names) },
		} {
			stmt, args := query()
			var out string
			var plan any
			if err := queryRow(ctx, stmts(db), "EXPLAIN (FORMAT JSON) "+stmt, args, &out); err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			if err := json.Unmarshal([]byte(out), &plan); err != nil {
				t.Fatal(err)
			}
			checkPlan(t, sc.name+"/"+what, plan, q.t.raw, q.t.raw+"_list")
		}
	}
}

// explainList explains the query of ListJobs(f) after the cursor and
// returns its plan, and the cursor of the page's last job (nil when the
// page is short).
func explainList(t *testing.T, q *Queue, f queue.JobFilter, after *listCursor) (any, *listCursor) {
	t.Helper()
	ctx := context.Background()
	now := micros(time.Now())
	cond, args, err := q.filterCond(f, now)
	if err != nil {
		t.Fatal(err)
	}
	o := orderOf(f.State)
	var plan any
	var last *listCursor
	err = q.inspectRead(ctx, 0, true, func(st statements) error {
		query, qargs, err := q.listQuery(ctx, st, f, now, cond, args, after, nil, defaultPage+1, jobCols)
		if err != nil || query == "" {
			return err
		}
		var out string
		if err := queryRow(ctx, st, "EXPLAIN (FORMAT JSON) "+q.sqlOnce(query), qargs, &out); err != nil {
			return err
		}
		if err := json.Unmarshal([]byte(out), &plan); err != nil {
			return err
		}
		rows, err := q.scanRows(ctx, st, q.sqlOnce(query), qargs)
		if err != nil || len(rows) <= defaultPage {
			return err
		}
		c := o.cursorOf(rows[defaultPage-1])
		last = &c
		return nil
	})
	if err != nil {
		t.Fatalf("explaining %+v: %v", f, err)
	}
	return plan, last
}

// checkPlan fails if plan scans table sequentially or reads no index
// named index.
func checkPlan(t *testing.T, what string, plan any, table, index string) {
	t.Helper()
	var seq, indexed, jit bool
	var walk func(v any)
	walk = func(v any) {
		switch n := v.(type) {
		case []any:
			for _, x := range n {
				walk(x)
			}
		case map[string]any:
			if n["Node Type"] == "Seq Scan" && n["Relation Name"] == table {
				seq = true
			}
			if n["Index Name"] == index {
				indexed = true
			}
			if _, ok := n["JIT"]; ok {
				jit = true
			}
			for _, x := range n {
				walk(x)
			}
		}
	}
	walk(plan)
	if seq || !indexed || jit {
		b, _ := json.MarshalIndent(plan, "", " ")
		t.Errorf("%s: the plan scans the table (%v), does not read %s (%v) or compiles with JIT (%v):\n%s", what, seq, index, !indexed, jit, b)
	}
}

// TestFinishedPlansMySQL checks on MySQL/MariaDB, which have no
// (state, finished_at) index since migration 0014, that the reads of
// finished jobs by finish time (the prune, DeadSince's counts and
// CancelledSince) read the list index, one range per queue, and scan no
// table: each is explained as the code builds it, over several queues.
func TestFinishedPlansMySQL(t *testing.T) {
	ctx := context.Background()
	db, q := planQueue(t, "mysql", testutil.MySQLEnv, "fplans_")
	var finished int
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.statistics WHERE table_schema = DATABASE() AND table_name = ? AND index_name = ?", q.t.raw, q.t.raw+"_finished").Scan(&finished); err != nil {
		t.Fatal(err)
	}
	if finished != 0 {
		t.Fatalf("the jobs table still has the (state, finished_at) index %s_finished", q.t.raw)
	}
	// Most jobs finished, in four queues, a few cancelled ones still
	// holding their lease token, some pending, every state in every queue
	// (as the queues probed are those the counts table has jobs of in the
	// state). The rows come from the
	// numbers 1 to 20,000 (a cross join of digits, which MySQL has too).
	now := time.Now().UnixMicro()
	if _, err := db.ExecContext(ctx, q.sqlOnce(`INSERT INTO {jobs} (id, queue, name, payload, priority, attempts, max_attempts, timeout_us, unique_key, tags, meta,
  available_at, run_at, created_at, updated_at, finished_at, last_error, lease_token, state)
SELECT CONCAT('j', g), CONCAT('q', FLOOR(g / 7) % 4), 'Job', '{}', 0, 0, 0, 0, NULL, '', '', ?, ?, ?, ?,
  CASE WHEN s = 'pending' THEN 0 ELSE ? - g * 1000 END, '', CASE WHEN s = 'cancelled' AND g % 40 = 14 THEN CONCAT('t', g) END, s
FROM (SELECT g, CASE WHEN g % 20 < 12 THEN 'done' WHEN g % 20 < 14 THEN 'dead' WHEN g % 20 = 14 THEN 'cancelled' ELSE 'pending' END AS s
  FROM (SELECT 1 + a.d + 10 * b.d + 100 * c.d + 1000 * e.d + 10000 * f.d AS g
    FROM (SELECT 0 AS d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9) a,
      (SELECT 0 AS d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9) b,
      (SELECT 0 AS d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9) c,
      (SELECT 0 AS d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9) e,
      (SELECT 0 AS d UNION ALL SELECT 1) f) n) x`), now, now, now, now, now); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, q.sqlOnce("ANALYZE TABLE {jobs}")); err != nil {
		t.Fatal(err)
	}
	names := []string{"q0", "q1", "q2", "q3"}
	cutoff := now - 10000*1000
	for _, tc := range []struct {
		what  string
		query string
		args  []any
	}{
		{"prune", "", nil},
		{"DeadSince older", "", nil},
		{"DeadSince recent", "", nil},
		{"CancelledSince", "", nil},
	} {
		switch tc.what {
		case "prune":
			tc.query, tc.args = q.pruneQuery(stateDone, cutoff, names, pruneBatch/len(names))
		case "DeadSince older":
			tc.query, tc.args = q.countFinishedQuery(stateDead, "<", cutoff, names, []int64{1, 10, 100, 1000})
		case "DeadSince recent":
			tc.query, tc.args = q.countFinishedQuery(stateDead, ">=", cutoff, names, []int64{1, 10, 100, 1000})
		case "CancelledSince":
			tc.query, tc.args = q.cancelledQuery(cutoff, names)
		}
		checkMySQLPlan(t, db, tc.what, tc.query, tc.args, q.t.raw, q.t.raw+"_list")
	}
}

// checkMySQLPlan fails unless every row of EXPLAIN query that reads table
// reads it through index, by a range or a lookup, never a full scan.
func checkMySQLPlan(t *testing.T, db *sql.DB, what, query string, args []any, table, index string) {
	t.Helper()
	reads := 0
	plan := mysqlPlan(t, db, what, query, args)
	for _, r := range plan {
		if r["table"] != table {
			continue
		}
		reads++
		if r["key"] != index || r["type"] == "ALL" || r["type"] == "index" {
			t.Errorf("%s: reads %s by %s (%s), want a range of %s:\n%v", what, table, r["key"], r["type"], index, plan)
		}
	}
	if reads == 0 {
		t.Errorf("%s: the plan does not read %s:\n%v", what, table, plan)
	}
}

// mysqlPlan returns the rows of EXPLAIN query on db, each by column name.
func mysqlPlan(t *testing.T, db *sql.DB, what, query string, args []any) []map[string]string {
	t.Helper()
	rows, err := db.QueryContext(context.Background(), "EXPLAIN "+query, args...)
	if err != nil {
		t.Fatalf("%s: EXPLAIN: %v\n%s", what, err, query)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		t.Fatal(err)
	}
	var plan []map[string]string
	for rows.Next() {
		vals, err := testutil.NullStrings(rows, len(cols))
		if err != nil {
			t.Fatal(err)
		}
		row := map[string]string{}
		for i, c := range cols {
			row[c] = vals[i].String
		}
		plan = append(plan, row)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return plan
}

// planQueue opens a Queue of its own tables on the server env names
// (through the database/sql driver driverName), set up, and dropped with
// the database closed when the test ends.
func planQueue(t *testing.T, driverName, env, prefix string) (*sql.DB, *Queue) {
	t.Helper()
	db, err := sql.Open(driverName, testutil.DSN(t, env))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	q, err := New(db, WithTable(testutil.Name(prefix)))
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Setup(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := q.DropTables(context.Background()); err != nil {
			t.Errorf("DropTables: %v", err)
		}
	})
	return db, q
}

// planExec returns a function that runs a statement written as a
// template (sqlOnce) on db, failing t on an error.
func planExec(t *testing.T, db *sql.DB, q *Queue) func(stmt string, args ...any) {
	return func(stmt string, args ...any) {
		t.Helper()
		if _, err := db.ExecContext(context.Background(), q.sqlOnce(stmt), args...); err != nil {
			t.Fatalf("%v\n%s", err, stmt)
		}
	}
}

// statsScenario is a state of the planner's statistics of the jobs table
// and how to bring it about after the one before.
type statsScenario struct {
	name  string
	setup func()
}

// statsScenarios are the states of the statistics a plan test checks in
// turn on PostgreSQL: missing (never analyzed), fresh (analyzed), stale
// (analyzed, then the table doubled by double) and deleted (pg_statistic
// rows of the table removed).
func statsScenarios(exec func(stmt string, args ...any), q *Queue, double func()) []statsScenario {
	return []statsScenario{
		{"missing", func() {}},
		{"fresh", func() { exec("ANALYZE {jobs}") }},
		{"stale", double},
		{"deleted", func() { exec("DELETE FROM pg_statistic WHERE starelid = CAST(? AS regclass)", q.t.jobs) }},
	}
}

// sqlOnce readies a statement a test writes as a template ({jobs} and the
// other table names, ? placeholders) for q's dialect.
func (q *Queue) sqlOnce(tmpl string) string {
	return q.d.rebind(q.t.replacer.Replace(tmpl))
}

// TestUniqueKeyPlans checks that the statements which look a unique key
// up among pending jobs (the duplicate's holder, Replace's delete, the
// revivals' checks) still read the unique index after migration 0018/0019
// widened its condition to rows in their own hold states: SQLite uses a
// partial index only when the query repeats one of its OR terms, and
// PostgreSQL only when the query's condition implies the index's. The
// table holds 20,000 keyed jobs, most finished, some with hold states.
func TestUniqueKeyPlans(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		driver, env string
	}{{"sqlite", ""}, {"pgx", testutil.PostgresEnv}} {
		t.Run(tc.driver, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			var db *sql.DB
			var q *Queue
			if tc.env == "" {
				var err error
				if db, err = sql.Open("sqlite", filepath.Join(t.TempDir(), "plan.db")); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { db.Close() })
				if q, err = New(db, WithTable("plans")); err != nil {
					t.Fatal(err)
				}
				if err := q.Setup(ctx); err != nil {
					t.Fatal(err)
				}
			} else {
				db, q = planQueue(t, tc.driver, tc.env, "uplans_")
			}
			now := time.Now().UnixMicro()
			if _, err := db.ExecContext(ctx, q.sqlOnce(`WITH RECURSIVE g(i) AS (SELECT CAST(? AS INT) UNION ALL SELECT i + 1 FROM g WHERE i < 20000)
INSERT INTO {jobs} (id, queue, name, payload, priority, attempts, max_attempts, timeout_us, unique_key, tags, meta,
  available_at, run_at, created_at, updated_at, finished_at, last_error, state, unique_hold)
SELECT 'j' || i, 'q' || (i % 4), 'Job', ?, 0, 0, 25, 0, 'k' || i, '', '', CAST(? AS BIGINT), CAST(? AS BIGINT), CAST(? AS BIGINT), CAST(? AS BIGINT), 0, '',
  CASE WHEN i % 20 < 14 THEN 'done' WHEN i % 20 < 17 THEN 'dead' ELSE 'pending' END,
  CASE WHEN i % 5 = 0 THEN ',dead,done,' END FROM g`), 1, []byte("{}"), now, now, now, now); err != nil {
				t.Fatal(err)
			}
			if _, err := db.ExecContext(ctx, q.sqlOnce("ANALYZE {jobs}")); err != nil {
				t.Fatal(err)
			}
			index := q.t.raw + "_unique"
			for what, tc := range map[string]struct {
				id   query
				args []any
			}{
				"holder":  {qPendingByKey, []any{"q1", "k17"}},
				"replace": {qReplaceWaiting, []any{"q1", "k17", "x"}},
				"revive": {qRevive, []any{"q1", "Job", []byte("{}"), 0, 0, 0, "k17", "", "", now, now, now, 1, now, 0,
					"j17", "q1", "k17"}},
				"revive held": {qReviveHeld, []any{"q1", "Job", []byte("{}"), 0, 0, 0, "k17", "", "", now, now, now, 1, now, 0, ",dead,",
					"j17", "q1", "k17", "j17"}},
			} {
				plan := explainAny(t, db, q, q.stmt(tc.id), tc.args)
				// SQLite: a SEARCH of the index (not a SCAN through it);
				// PostgreSQL: an Index Scan or Index Only Scan of it.
				if !strings.Contains(plan, "SEARCH o USING INDEX "+index) && !strings.Contains(plan, "SEARCH plans USING INDEX "+index) &&
					!strings.Contains(plan, "Index Scan using "+index) && !strings.Contains(plan, "Index Only Scan using "+index) {
					t.Errorf("%s: the plan does not search %s:\n%s", what, index, plan)
				}
			}
		})
	}
}

// explainAny returns the plan of stmt as text: EXPLAIN QUERY PLAN's
// details on SQLite, EXPLAIN's lines on PostgreSQL.
func explainAny(t *testing.T, db *sql.DB, q *Queue, stmt string, args []any) string {
	t.Helper()
	prefix := "EXPLAIN "
	if q.d.name() == "sqlite" {
		prefix = "EXPLAIN QUERY PLAN "
	}
	rows, err := db.QueryContext(context.Background(), prefix+stmt, args...)
	if err != nil {
		t.Fatalf("%v\n%s", err, stmt)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintln(&b, vals[len(vals)-1])
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestSearchWindowPlansMySQL checks on MySQL/MariaDB that a payload
// search's window reads deep in a queue (its jobs' keys after a cursor,
// and the matches up to the window's end) read the range of the order's
// index that starts at the cursor: a range of the claim index for ready
// and scheduled jobs, of the list index for dead ones, and about as many
// index entries as the window and the cursor's run time hold. On a queue
// of one priority whose jobs were pushed in batches (each batch one run
// time), MariaDB chose a ref access (queue, state, priority) that reads
// the index from the start of the priority with the cursor as an index
// condition: 18,000 entries for a window 90% into 20,000 jobs here, 11,378
// pages and seconds per window 1.7M jobs deep, until listFrom named the
// index.
func TestSearchWindowPlansMySQL(t *testing.T) {
	ctx := context.Background()
	db, q := planQueue(t, "mysql", testutil.MySQLEnv, "wplans_")
	// Two queues of 20,000 jobs of one priority (as most queues have),
	// numbered by a cross join of digits, pushed in batches of 5,000 (one
	// run time each): r1's jobs all ready, q1's ready, scheduled an hour
	// ahead and dead. A window reads its jobs and those before it that
	// share the cursor's run time (tie).
	const window, tie = 100, 5000
	now := time.Now().UnixMicro()
	fill := func(queueName string, n int, mixed bool) {
		t.Helper()
		if _, err := db.ExecContext(ctx, q.sqlOnce(`INSERT INTO {jobs} (id, queue, name, payload, priority, attempts, max_attempts, timeout_us, unique_key, tags, meta,
  available_at, run_at, created_at, updated_at, finished_at, last_error, lease_token, state)
SELECT CONCAT('j', `+queueName+`, '-', g), `+queueName+`, 'Job', CONCAT('{"n":', g, '}'), 0, 0, 0, 0, NULL, '', '',
  r, r, ?, ?, CASE WHEN s = 'pending' THEN 0 ELSE ? - g * 1000 END, '', NULL, s
FROM (SELECT g, CASE WHEN ? AND g % 5 = 4 THEN 'dead' ELSE 'pending' END AS s,
  CASE WHEN ? AND g % 5 = 3 THEN ? + 3600000000 + FLOOR(g / ?) * 1000 ELSE ? - 1000000000 + FLOOR(g / ?) * 1000 END AS r
  FROM (SELECT 1 + a.d + 10 * b.d + 100 * c.d + 1000 * e.d + 10000 * f.d AS g
    FROM (SELECT 0 AS d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9) a,
      (SELECT 0 AS d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9) b,
      (SELECT 0 AS d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9) c,
      (SELECT 0 AS d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9) e,
      (SELECT 0 AS d UNION ALL SELECT 1) f) n WHERE g <= ?) x`), now, now, now, mixed, mixed, now, tie, now, tie, n); err != nil {
			t.Fatal(err)
		}
	}
	fill("'q1'", 20000, true)
	fill("'r1'", 20000, false)
	if _, err := db.ExecContext(ctx, q.sqlOnce("ANALYZE TABLE {jobs}")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		state     queue.JobState
		queueName string
	}{{queue.StateReady, "r1"}, {queue.StateReady, "q1"}, {queue.StateScheduled, "q1"}, {queue.StateDead, "q1"}} {
		st := tc.state
		f := queue.JobFilter{State: st, Queue: tc.queueName, Search: "needle"}
		index := q.t.raw + "_claim"
		if orderOf(st) == byFinish {
			index = q.t.raw + "_list"
		}
		now := micros(time.Now())
		cond, args, err := q.filterCond(f, now)
		if err != nil {
			t.Fatal(err)
		}
		match, margs := q.searchCond(cond, args, []string{f.Search})
		o := orderOf(st)
		// One connection, so that its session's handler counts are the
		// reads' own.
		conn, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		err = func(st statements) error {
			// The cursor: the key of the job 90% into the queue's order.
			l := q.lister(st, f, now)
			all, aargs, err := l.query(ctx, cond, args, nil, nil, 20000, o.keyCols())
			if err != nil {
				return err
			}
			keys, err := q.readKeys(ctx, st, q.rebind(all), aargs, o, false, false)
			if err != nil {
				return err
			}
			if len(keys) < 1000 {
				t.Fatalf("%s: %d jobs in the state, want thousands", f.State, len(keys))
			}
			after, upTo := keys[len(keys)*9/10].key, keys[len(keys)*9/10+window].key
			lean, largs, err := l.query(ctx, cond, args, &after, nil, window, o.keyCols())
			if err != nil {
				return err
			}
			matches, mrgs, err := l.query(ctx, match, margs, &after, &upTo, window, o.keyCols()+", id")
			if err != nil {
				return err
			}
			for what, read := range map[string]struct {
				query string
				args  []any
			}{"keys": {lean, largs}, "matches": {matches, mrgs}} {
				what := fmt.Sprintf("%s/%s/%s", f.Queue, f.State, what)
				query := q.rebind(read.query)
				checkMySQLRange(t, db, what, query, read.args, q.t.raw, index)
				before := handlerReads(t, st)
				if _, err := q.readKeys(ctx, st, query, read.args, o, strings.HasSuffix(what, "/matches"), false); err != nil {
					return err
				}
				if n := handlerReads(t, st) - before; n > 3*window+2*tie {
					t.Errorf("%s: read %d index entries for a window of %d jobs 90%% into %d", what, n, window, len(keys))
				}
			}
			return nil
		}(stmts(conn))
		conn.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
}

// checkMySQLRange fails unless EXPLAIN of query on db reads table by a
// range of index: not a ref access, which reads from the start of the
// equal prefix, nor a scan.
func checkMySQLRange(t *testing.T, db *sql.DB, what, query string, args []any, table, index string) {
	t.Helper()
	reads := 0
	plan := mysqlPlan(t, db, what, query, args)
	for _, r := range plan {
		if r["table"] != table {
			continue
		}
		reads++
		if r["key"] != index || r["type"] != "range" {
			t.Errorf("%s: reads %s by %s (%s), want a range of %s:\n%v\n%s", what, table, r["key"], r["type"], index, plan, query)
		}
	}
	if reads == 0 {
		t.Errorf("%s: the plan does not read %s:\n%v", what, table, plan)
	}
}

// handlerReads is how many index entries the session has read so far:
// Handler_read_next and Handler_read_prev count those the index
// condition passed, and MariaDB's Handler_icp_attempts those it tested
// (MySQL has no such count).
func handlerReads(t *testing.T, st statements) int64 {
	t.Helper()
	rows, err := st.Query(context.Background(), "SHOW SESSION STATUS WHERE Variable_name IN ('Handler_read_next', 'Handler_read_prev', 'Handler_icp_attempts')")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var sum int64
	for rows.Next() {
		var name string
		var n int64
		if err := rows.Scan(&name, &n); err != nil {
			t.Fatal(err)
		}
		sum += n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return sum
}
