package sqlqueue

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/meridianjobs/meridian/internal/testutil"
	queue "github.com/meridianjobs/meridian/queue/driver"
)

// TestLeasePlans checks on PostgreSQL that the batch statements of start
// marks, acks and extends (one of each op, and the mark with an ack in
// one statement) are planned once per connection, not per call: after
// more calls than the plan cache's five custom plans, PostgreSQL keeps
// their generic plan (pg_prepared_statements counts it). Before the
// leases came through the leases function, unnest's assumed ten rows
// made the generic plan dearer than a small batch's custom one, and every
// call was planned again (run AN: as long as it ran). It checks too that
// the generic plan reads the jobs by primary key and never the whole
// table, whatever the statistics: missing, fresh, stale and deleted, on a
// table shaped as in production (most jobs done, some scheduled hours
// ahead, some dead, a few leased).
func TestLeasePlans(t *testing.T) {
	ctx := context.Background()
	db, q := planQueue(t, "pgx", testutil.PostgresEnv, "lplans_")
	now := time.Now().UnixMicro()
	exec := planExec(t, db, q)
	fill := func(from, to int) {
		exec(`INSERT INTO {jobs} (id, queue, name, payload, priority, attempts, max_attempts, timeout_us, unique_key, tags, meta,
  available_at, run_at, created_at, updated_at, finished_at, last_error, lease_token, lease_expires_at, state)
SELECT 'j' || g, 'q' || (g % 4), 'Job', convert_to('{}', 'UTF8'), 0, 0, 0, 0, NULL, '', '',
  r, r, CAST(? AS BIGINT), CAST(? AS BIGINT), CASE WHEN s = 'pending' THEN 0 ELSE CAST(? AS BIGINT) - g END, '',
  CASE WHEN g % 60 = 17 THEN 't' || g END, CASE WHEN g % 60 = 17 THEN CAST(? AS BIGINT) ELSE 0 END, s
FROM (SELECT g, CASE WHEN g % 20 < 16 THEN 'done' WHEN g % 20 = 16 THEN 'dead' ELSE 'pending' END AS s,
  CASE WHEN g % 20 = 19 THEN CAST(? AS BIGINT) + g * 1000 ELSE CAST(? AS BIGINT) - g END AS r
  FROM generate_series(CAST(? AS INT), CAST(? AS INT)) g) x`,
			now, now, now, now+3600e6, now+3600e6, now, from, to)
	}
	fill(1, planRows)

	// Leases of jobs the fill leased (one ready job in 60).
	var leases []queue.Lease
	rows, err := db.QueryContext(ctx, q.sqlOnce("SELECT id, lease_token FROM {jobs} WHERE lease_token IS NOT NULL ORDER BY id LIMIT 3"))
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var l queue.Lease
		if err := rows.Scan(&l.JobID, &l.Token); err != nil {
			t.Fatal(err)
		}
		leases = append(leases, l)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	rows.Close()
	if len(leases) < 2 {
		t.Fatalf("the fill leased %d jobs, want 2 or more", len(leases))
	}
	// The statements as finishLeases runs them, and their arguments: one
	// lease (the most common batch at a low rate) and two.
	type stmtCase struct {
		name string
		text string
		args []any
	}
	opName := [...]string{leaseStart: "start", leaseAck: "ack", leaseDone: "done", leaseExtend: "extend"}
	var cases []stmtCase
	for _, op := range []leaseOp{leaseStart, leaseAck, leaseDone, leaseExtend} {
		c := leaseChange{op: op, leases: leases[:1], extend: time.Minute}
		cases = append(cases, stmtCase{opName[op], q.stmt(leaseQueries[op].many), arrayArgs(c.leases, now, c.args(now))})
	}
	for ops, stmt := range pgBothLeases {
		var args []any
		for i, op := range ops {
			c := leaseChange{op: op, leases: leases[i : i+1]}
			args = append(args, arrayArgs(c.leases, now, c.args(now))...)
		}
		cases = append(cases, stmtCase{opName[ops[0]] + "+" + opName[ops[1]], q.stmt(stmt), args})
	}

	for _, sc := range statsScenarios(exec, q, func() { fill(planRows+1, 2*planRows) }) {
		sc.setup()
		for i, c := range cases {
			checkLeasePlan(t, db, q, fmt.Sprintf("%s/%s", sc.name, c.name), fmt.Sprintf("lplan_%d", i), c.text, c.args)
		}
	}
}

// checkLeasePlan prepares stmt on a connection of its own, checks that
// its generic plan reads the jobs by primary key and scans no table, then
// runs it with args (in a transaction rolled back, so the leases stay)
// more times than PostgreSQL's plan cache plans a statement afresh, and
// checks that the cache kept the generic plan.
func checkLeasePlan(t *testing.T, db *sql.DB, q *Queue, what, name, stmt string, args []any) {
	t.Helper()
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	run := func(s string) {
		t.Helper()
		if _, err := conn.ExecContext(ctx, s); err != nil {
			t.Fatalf("%s: %v\n%s", what, err, s)
		}
	}
	lits := make([]string, len(args))
	for i, a := range args {
		switch v := a.(type) {
		case int64:
			lits[i] = strconv.FormatInt(v, 10)
		case string:
			lits[i] = "'" + strings.ReplaceAll(v, "'", "''") + "'"
		default:
			t.Fatalf("%s: argument %d is a %T", what, i, a)
		}
	}
	call := "(" + strings.Join(lits, ", ") + ")"

	// The generic plan, explained through a statement of its own: one
	// made under force_generic_plan counts as a generic plan.
	run("PREPARE " + name + "_g AS " + stmt)
	defer run("DEALLOCATE " + name + "_g")
	run("SET plan_cache_mode = force_generic_plan")
	var out string
	if err := conn.QueryRowContext(ctx, "EXPLAIN (FORMAT JSON) EXECUTE "+name+"_g"+call).Scan(&out); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	run("RESET plan_cache_mode")
	var plan any
	if err := json.Unmarshal([]byte(out), &plan); err != nil {
		t.Fatal(err)
	}
	checkPlan(t, what+" (generic plan)", plan, q.t.raw, q.t.raw+"_pkey")

	run("PREPARE " + name + " AS " + stmt)
	defer run("DEALLOCATE " + name)
	run("BEGIN")
	for range 8 {
		run("EXECUTE " + name + call)
	}
	run("ROLLBACK")
	var generic, custom int64
	if err := conn.QueryRowContext(ctx, "SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE name = $1", name).Scan(&generic, &custom); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if generic == 0 {
		t.Errorf("%s: PostgreSQL planned each of %d calls afresh and kept no generic plan", what, custom)
	}
}

// leasesFnVersion is PostgreSQL's schema version that made the leases
// function (0022_lease_fn).
const leasesFnVersion = 22

// TestLeasesOneVersionDown checks that this release's lease statements
// work over PostgreSQL tables one version below the leases function's
// (leasesFnVersion), where the function is gone (a rolling downgrade
// undoes its migration while the Worker runs): the first statement that
// finds no function runs again reading unnest, and once Setup has made
// the function again the statements read it again. Start marks, acks and
// extends are checked on each side.
func TestLeasesOneVersionDown(t *testing.T) {
	ctx := t.Context()
	db, q := planQueue(t, "pgx", testutil.PostgresEnv, "ldown_")
	// Another process's Queue migrates: q, already in use, goes on.
	other, err := New(db, WithTable(q.t.raw))
	if err != nil {
		t.Fatal(err)
	}
	round := func(what string) {
		t.Helper()
		if _, err := q.PushMany(ctx, []queue.Job{{Name: "n"}, {Name: "n"}}); err != nil {
			t.Fatalf("%s: PushMany: %v", what, err)
		}
		got, err := q.ReserveUnstarted(ctx, nil, 2, time.Minute)
		if err != nil || len(got) != 2 {
			t.Fatalf("%s: ReserveUnstarted = %d jobs, %v", what, len(got), err)
		}
		leases := []queue.Lease{got[0].Lease(), got[1].Lease()}
		if lost, err := q.ExtendMany(ctx, leases, time.Minute); err != nil || len(lost) > 0 {
			t.Fatalf("%s: ExtendMany lost %v, %v", what, lost, err)
		}
		// A mark alone, a mark with another job's ack, an ack alone.
		for _, c := range []struct{ starts, acks []queue.Lease }{{leases[:1], nil}, {leases[1:], leases[:1]}, {nil, leases[1:]}} {
			if lostStarts, lostAcks, err := testutil.StartAck(ctx, q, c.starts, c.acks); err != nil || len(lostStarts)+len(lostAcks) > 0 {
				t.Fatalf("%s: start marks and acks lost %v and %v, %v", what, lostStarts, lostAcks, err)
			}
		}
	}
	round("at the latest version")
	if _, v, err := other.MigrateDown(ctx, leasesFnVersion-1); err != nil || v != leasesFnVersion-1 {
		t.Fatalf("MigrateDown(%d) = %d, %v", leasesFnVersion-1, v, err)
	}
	round("below the leases function")
	if !q.unnestLeases.Load() {
		t.Error("below the leases function, the lease statements did not fall back to unnest")
	}
	if err := q.Setup(ctx); err != nil {
		t.Fatal(err)
	}
	round("after Setup")
	if q.unnestLeases.Load() {
		t.Error("after Setup the lease statements still read unnest")
	}
}
