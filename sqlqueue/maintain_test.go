package sqlqueue_test

import (
	"strings"
	"testing"
	"time"

	"github.com/meridianjobs/meridian/internal/testutil"
	queue "github.com/meridianjobs/meridian/queue/driver"
	"github.com/meridianjobs/meridian/sqlqueue"
)

// TestPostgresMaintainVacuums checks that Setup gives the jobs table its
// own autovacuum settings and that a maintenance pass vacuums the table
// once it holds many dead rows.
func TestPostgresMaintainVacuums(t *testing.T) {
	if testing.Short() {
		t.Skip("pushes 10,000 jobs and waits for the server's statistics")
	}
	b := serverBackend(t, sqlqueue.Postgres, "pgx", "MERIDIAN_POSTGRES_DSN")
	s := newStore(t, b)
	q, db := s.open(t)
	ctx := t.Context()

	var opts string
	if err := db.QueryRowContext(ctx, "SELECT array_to_string(reloptions, ',') FROM pg_class WHERE oid = to_regclass($1)", s.table).Scan(&opts); err != nil {
		t.Fatalf("reading the table's options: %v", err)
	}
	if !strings.Contains(opts, "autovacuum_vacuum_scale_factor=0.01") {
		t.Errorf("jobs table options = %q, want its own autovacuum_vacuum_scale_factor", opts)
	}

	jobs := make([]queue.Job, 10000)
	for i := range jobs {
		jobs[i] = queue.Job{Name: "n"}
	}
	if _, err := q.PushMany(ctx, jobs); err != nil {
		t.Fatal(err)
	}
	// A backend publishes its table counts at most once a second, and an
	// idle one only after 10 s (PostgreSQL 15's idle stats interval): a
	// DELETE on a pooled connection that then sits idle could stay unseen
	// past the deadline below. So the DELETE runs on one connection that
	// then asks for its counts to be flushed at once, at the end of that
	// very statement.
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(ctx, "DELETE FROM "+s.table); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(ctx, "SELECT pg_stat_force_next_flush()"); err != nil {
		t.Fatal(err)
	}
	conn.Close()
	vacuums := func() (dead, count int64) {
		t.Helper()
		err := db.QueryRowContext(ctx, "SELECT n_dead_tup, vacuum_count FROM pg_stat_user_tables WHERE relid = to_regclass($1)", s.table).Scan(&dead, &count)
		if err != nil {
			t.Fatalf("reading the table's statistics: %v", err)
		}
		return dead, count
	}
	// The counts are flushed; the loop allows for a slow server.
	var dead int64
	if !testutil.WaitFor(10*time.Second, func() bool { dead, _ = vacuums(); return dead >= 10000 }) {
		t.Fatalf("the statistics count %d dead rows after deleting 10,000", dead)
	}
	if leader, _, err := q.Maintain(ctx); err != nil || !leader {
		t.Fatalf("Maintain = leader %v, %v", leader, err)
	}
	if _, n := vacuums(); n == 0 {
		t.Fatal("Maintain did not vacuum a jobs table with 10,000 dead rows")
	}
}

// TestPostgresVacuumsAfterAcks checks that a Queue that has acked enough
// jobs vacuums the jobs table in the background, without a maintenance
// pass, and that Close waits for it. The thresholds are lowered so that
// the test acks 150 jobs instead of 100,000.
func TestPostgresVacuumsAfterAcks(t *testing.T) {
	q, vacuums, ack := vacuumQueue(t, 150)
	sqlqueue.SetVacuumThresholds(q, 100, -1)
	ack(50)
	if n := vacuums(); n != 0 {
		t.Fatalf("vacuumed %d times after 50 acks, below the threshold of 100", n)
	}
	ack(100)
	testutil.Eventually(t, 30*time.Second, func() bool { return vacuums() > 0 }, "no vacuum within 30 s of the 100th ack")
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestPostgresVacuumsAfterClaimWalk checks that a Queue whose claims take
// one job each, as at a low rate, vacuums the jobs table long before
// vacuumAfterAcks: each claim adds the jobs acked since the last check to
// an estimate of the dead index entries claims walk, and the check starts
// when it reaches its bound (lowered here from 4,000,000 to 500, reached
// at the 33rd claim: 0 + 1 + ... + 32 = 528).
func TestPostgresVacuumsAfterClaimWalk(t *testing.T) {
	q, vacuums, ack := vacuumQueue(t, 60)
	sqlqueue.SetVacuumThresholds(q, 0, -1) // vacuumAfterAcks stays; vacuum whatever the dead rows
	sqlqueue.SetVacuumWalk(q, 500)
	for range 30 {
		ack(1)
	}
	if n := vacuums(); n != 0 {
		t.Fatalf("vacuumed %d times after 30 claims (walk 435), below the bound of 500", n)
	}
	for range 10 {
		ack(1)
	}
	testutil.Eventually(t, 30*time.Second, func() bool { return vacuums() > 0 }, "no vacuum within 30 s of the 33rd claim")
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
}

// vacuumQueue opens a PostgreSQL Queue of its own tables holding n jobs,
// and returns it with a reader of its jobs table's vacuum count and a
// function that reserves k jobs in one claim and acks them.
func vacuumQueue(t *testing.T, n int) (*sqlqueue.Queue, func() int64, func(k int)) {
	t.Helper()
	b := serverBackend(t, sqlqueue.Postgres, "pgx", "MERIDIAN_POSTGRES_DSN")
	s := newStore(t, b)
	q, db := s.open(t)
	ctx := t.Context()
	vacuums := func() int64 {
		t.Helper()
		var v int64
		if err := db.QueryRowContext(ctx, "SELECT vacuum_count FROM pg_stat_user_tables WHERE relid = to_regclass($1)", s.table).Scan(&v); err != nil {
			t.Fatalf("reading the table's statistics: %v", err)
		}
		return v
	}
	jobs := make([]queue.Job, n)
	for i := range jobs {
		jobs[i] = queue.Job{Name: "n"}
	}
	if _, err := q.PushMany(ctx, jobs); err != nil {
		t.Fatal(err)
	}
	ack := func(k int) {
		t.Helper()
		got, err := q.Reserve(ctx, nil, k, time.Minute)
		if err != nil || len(got) != k {
			t.Fatalf("Reserve = %d jobs, %v; want %d", len(got), err, k)
		}
		leases := make([]queue.Lease, len(got))
		for i, j := range got {
			leases[i] = j.Lease()
		}
		if lost, err := testutil.AckMany(ctx, q, leases); err != nil || len(lost) > 0 {
			t.Fatalf("AckMany lost %d, %v", len(lost), err)
		}
	}
	return q, vacuums, ack
}

// TestPostgresVacuumAnalyzesAtMostEvery10Minutes checks that the vacuum
// of the jobs table analyzes it only when no analyze ran in the last ten
// minutes: the first of two vacuums in a row analyzes, the second not.
func TestPostgresVacuumAnalyzesAtMostEvery10Minutes(t *testing.T) {
	b := serverBackend(t, sqlqueue.Postgres, "pgx", "MERIDIAN_POSTGRES_DSN")
	s := newStore(t, b)
	q, db := s.open(t)
	ctx := t.Context()
	sqlqueue.SetVacuumThresholds(q, 100, -1) // vacuum whatever the dead rows
	counts := func() (vacuums, analyzes int64) {
		t.Helper()
		err := db.QueryRowContext(ctx, "SELECT vacuum_count, analyze_count + autoanalyze_count FROM pg_stat_user_tables WHERE relid = to_regclass($1)", s.table).Scan(&vacuums, &analyzes)
		if err != nil {
			t.Fatalf("reading the table's statistics: %v", err)
		}
		return vacuums, analyzes
	}
	var analyzed int64
	for i := range 2 {
		if leader, _, err := q.Maintain(ctx); err != nil || !leader {
			t.Fatalf("Maintain = leader %v, %v", leader, err)
		}
		v, a := counts()
		if v != int64(i+1) {
			t.Fatalf("after %d maintenance passes the table was vacuumed %d times", i+1, v)
		}
		if i == 0 && a == 0 {
			t.Fatal("the first vacuum of a table never analyzed did not analyze it")
		}
		if i == 1 && a != analyzed {
			t.Errorf("the second vacuum in a row analyzed the table again (%d analyzes, then %d)", analyzed, a)
		}
		analyzed = a
	}
}
