package sqlqueue

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/meridianjobs/meridian/internal/testutil"
	"github.com/meridianjobs/meridian/queue"
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
	db, err := sql.Open("pgx", testutil.DSN(t, testutil.PostgresEnv))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	table := testutil.Name("plans_")
	q, err := New(db, WithTable(table))
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Setup(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := q.DropTables(context.Background()); err != nil {
			t.Errorf("DropTables: %v", err)
		}
	})
	now := time.Now().UnixMicro()
	exec := func(stmt string, args ...any) {
		t.Helper()
		if _, err := db.ExecContext(ctx, q.sqlOnce(stmt), args...); err != nil {
			t.Fatalf("%v\n%s", err, stmt)
		}
	}
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

	scenarios := []struct {
		name  string
		setup func()
	}{
		{"missing", func() {}},
		{"fresh", func() { exec("ANALYZE {jobs}") }},
		{"stale", func() { fill(planRows+1, 2*planRows) }}, // doubles the table after the ANALYZE
		{"deleted", func() { exec("DELETE FROM pg_statistic WHERE starelid = CAST(? AS regclass)", q.t.jobs) }},
	}
	for _, sc := range scenarios {
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
