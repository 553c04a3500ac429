package sqlqueue

import (
	"database/sql"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/meridianjobs/meridian/internal/testutil"
	queue "github.com/meridianjobs/meridian/queue/driver"
)

// TestClaimCursorsSweep checks that a cursor is followed for claimSweep
// from the first claim of its run, however often later claims move it,
// and that a short claim's drop forgets it.
func TestClaimCursorsSweep(t *testing.T) {
	t.Parallel()
	var c claimCursors
	t0 := time.Unix(1000, 0)
	c.set("q", claimCursor{priority: 1, runAt: 10, seq: 1}, nil, t0)
	for _, tc := range []struct {
		at   time.Duration
		seq  int64 // moved to, when ok
		want bool
	}{
		{0, 2, true},
		{claimSweep / 2, 3, true},
		{claimSweep - time.Millisecond, 4, true},
		{claimSweep, 0, false},
	} {
		now := t0.Add(tc.at)
		cur, ok := c.get("q", now)
		if ok != tc.want {
			t.Fatalf("at %v: get = %v, want %v", tc.at, ok, tc.want)
		}
		if ok {
			c.set("q", claimCursor{priority: 1, runAt: 10, seq: tc.seq}, &cur, now)
		}
	}
	if _, ok := c.get("other", t0); ok {
		t.Error("a queue never claimed has a cursor")
	}
	c.set("q", claimCursor{}, nil, t0)
	c.drop("q")
	if _, ok := c.get("q", t0); ok {
		t.Error("a dropped cursor is still followed")
	}
}

// TestClaimFromCursor checks on PostgreSQL and MySQL/MariaDB (SQLite
// claims from the start: see selectThenClaim) that a claim of one
// queue that takes all it asks for leaves a cursor the next claim starts
// after, and that a claim from a cursor that comes back short also reads
// behind it in the same Reserve: the jobs there that became claimable
// (one pushed with a run_at before it, as a push whose transaction
// commits late would be; one whose lease expired) are taken, first in
// claim order, and the cursor is dropped. On PostgreSQL it also checks
// by EXPLAIN ANALYZE that a claim from the cursor reads none of the jobs
// leased before it, where a claim from the start reads them all.
func TestClaimFromCursor(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		open func(t *testing.T) (*sql.DB, *Queue)
	}{
		{"postgres", func(t *testing.T) (*sql.DB, *Queue) { return planQueue(t, "pgx", testutil.PostgresEnv, "ccur_") }},
		{"mysql", func(t *testing.T) (*sql.DB, *Queue) { return planQueue(t, "mysql", testutil.MySQLEnv, "ccur_") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			db, q := tc.open(t)
			checkClaimFromCursor(t, db, q, tc.name == "postgres")
		})
	}
}

func checkClaimFromCursor(t *testing.T, db *sql.DB, q *Queue, explain bool) {
	ctx := t.Context()
	now := time.Now()
	jobs := make([]queue.Job, 100)
	ids := make([]string, len(jobs))
	for i := range jobs {
		ids[i] = fmt.Sprintf("job-%03d", i+1)
		jobs[i] = queue.Job{ID: ids[i], Name: "Job", Payload: []byte("{}"), AvailableAt: now.Add(-time.Hour + time.Duration(i)*time.Second)}
	}
	// Jobs scheduled ahead, never claimed, make the table large enough
	// that PostgreSQL's planner reads it through the claim index.
	for i := range 5000 {
		jobs = append(jobs, queue.Job{ID: fmt.Sprintf("ahead-%04d", i), Name: "Job", Payload: []byte("{}"), AvailableAt: now.Add(time.Hour)})
	}
	for rest := jobs; len(rest) > 0; rest = rest[min(len(rest), 1000):] {
		if _, err := q.PushMany(ctx, rest[:min(len(rest), 1000)]); err != nil {
			t.Fatal(err)
		}
	}
	reserve := func(n int) []queue.Job {
		t.Helper()
		got, err := q.Reserve(ctx, nil, n, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	first := reserve(40)
	if len(first) != 40 {
		t.Fatalf("first claim took %d jobs, want 40", len(first))
	}
	cur, ok := q.cursors.get(queue.DefaultQueue, time.Now())
	if !ok {
		t.Fatal("a claim that took all it asked for left no cursor")
	}
	if explain {
		queues := []string{queue.DefaultQueue}
		args := func(from *claimCursor) []any {
			return pgClaimArgs(queues, claimPlanLimit, time.Now(), time.Now().Add(time.Hour), "t", claimCount{fresh: 1}, "w", from)
		}
		fromCursor := pgExplainReads(t, db, q, queues, q.stmtN(qClaimFrom, 1), args(&cur))
		fromStart := pgExplainReads(t, db, q, queues, q.stmtN(qClaim, 1), args(nil))
		// Each claimed row is read twice (the claim index's scan, the
		// update's join), and the loose scan of the priorities reads one.
		if fromCursor > 2*claimPlanLimit+5 {
			t.Errorf("a claim of %d jobs from the cursor read %d rows", claimPlanLimit, fromCursor)
		}
		if fromStart < fromCursor+40 {
			t.Errorf("a claim of %d jobs from the start read %d rows, from the cursor %d: not the 40 leased ones more", claimPlanLimit, fromStart, fromCursor)
		}
	}

	if second := reserve(40); len(second) != 40 || second[0].ID != ids[40] || second[39].ID != ids[79] {
		t.Fatalf("second claim took %d jobs, want jobs 41 to 80", len(second))
	}
	if _, err := q.PushMany(ctx, []queue.Job{{ID: "late", Name: "Job", Payload: []byte("{}"), AvailableAt: now.Add(-2 * time.Hour)}}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, q.d.rebind("UPDATE "+q.t.jobs+" SET lease_expires_at = 0 WHERE id = ?"), first[0].ID); err != nil {
		t.Fatal(err)
	}
	third := reserve(40)
	got := make([]string, len(third))
	for i, j := range third {
		got[i] = j.ID
	}
	want := append([]string{"late", first[0].ID}, ids[80:]...)
	if !slices.Equal(got, want) {
		t.Errorf("third claim took %v,\nwant the late job, the expired one, then jobs 81 to 100: %v", got, want)
	}
	if len(third) > 1 && !third[1].Recovered {
		t.Error("the job taken back from its expired lease is not marked Recovered")
	}
	if _, ok := q.cursors.get(queue.DefaultQueue, time.Now()); ok {
		t.Error("a claim that came back short left a cursor")
	}
}
