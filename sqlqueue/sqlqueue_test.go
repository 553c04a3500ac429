package sqlqueue_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/meridianjobs/meridian/internal/testutil"
	queue "github.com/meridianjobs/meridian/queue/driver"
	"github.com/meridianjobs/meridian/sqlqueue"
)

// eachDialect runs fn as a subtest per dialect whose server is available.
func eachDialect(t *testing.T, fn func(t *testing.T, b backend)) {
	for d, open := range backends(t) {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			fn(t, open(t))
		})
	}
}

func TestNewRejectsBadTableNames(t *testing.T) {
	t.Parallel()
	db, err := sql.Open("sqlite", ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, name := range []string{"", "1jobs", "jobs; DROP TABLE users", `jo"bs`, "jobs-2", "a.b", strings.Repeat("x", 41), "jöbs"} {
		if _, err := sqlqueue.New(db, sqlqueue.WithTable(name)); err == nil {
			t.Errorf("WithTable(%q) accepted", name)
		}
	}
	for _, name := range []string{"jobs", "_j", "App_Jobs_2", strings.Repeat("x", 40)} {
		if _, err := sqlqueue.New(db, sqlqueue.WithTable(name)); err != nil {
			t.Errorf("WithTable(%q): %v", name, err)
		}
	}
	if _, err := sqlqueue.Schema(sqlqueue.SQLite, sqlqueue.WithTable("bad name")); err == nil {
		t.Errorf("Schema with a bad table name: no error")
	}
	if _, err := sqlqueue.Schema("oracle"); err == nil {
		t.Errorf("Schema of an unknown dialect: no error")
	}
}

func TestNewOptionsValidated(t *testing.T) {
	t.Parallel()
	db, err := sql.Open("sqlite", ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	bad := map[string]sqlqueue.Option{
		"zero visibility":  sqlqueue.WithVisibilityTimeout(0),
		"negative keep":    sqlqueue.WithRetention(-time.Second, 0),
		"unknown dialect":  sqlqueue.WithDialect("db2"),
		"zero maintenance": sqlqueue.WithMaintenance(0, time.Minute),
	}
	for name, opt := range bad {
		if _, err := sqlqueue.New(db, opt); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := sqlqueue.New(nil); err == nil {
		t.Errorf("New(nil): no error")
	}
}

func TestDialectDetection(t *testing.T) {
	t.Parallel()
	for driverName, want := range map[string]sqlqueue.Dialect{"sqlite": sqlqueue.SQLite, "pgx": sqlqueue.Postgres, "mysql": sqlqueue.MySQL} {
		db, err := sql.Open(driverName, map[string]string{"sqlite": ":memory:", "pgx": "postgres://nobody@127.0.0.1:1/none", "mysql": "nobody@tcp(127.0.0.1:1)/none"}[driverName])
		if err != nil {
			t.Fatal(err)
		}
		q, err := sqlqueue.New(db)
		if err != nil || q.Dialect() != want {
			t.Errorf("New over driver %s: dialect %v, %v; want %s", driverName, q, err, want)
		}
		// sqlx wraps the same *sql.DB and is accepted as it is.
		if q, err := sqlqueue.New(sqlx.NewDb(db, driverName)); err != nil || q.Dialect() != want {
			t.Errorf("New over sqlx.DB (%s): %v", driverName, err)
		}
		db.Close()
	}
}

// TestSchemaVersion checks the errors that say what to run, each a
// queue.ErrConfig: missing tables, tables of an older schema version
// (which Setup migrates), and tables newer than this release (which Setup
// refuses, naming both versions).
func TestSchemaVersion(t *testing.T) {
	eachDialect(t, func(t *testing.T, b backend) {
		s := newStore(t, b)
		db := b.open(t, s.path)
		q, err := sqlqueue.New(db, sqlqueue.WithTable(s.table))
		if err != nil {
			t.Fatal(err)
		}
		if err := q.Push(t.Context(), queue.Job{Name: "x"}); !errors.Is(err, queue.ErrConfig) || !strings.Contains(err.Error(), "run Setup") {
			t.Fatalf("Push before Setup = %v, want an ErrConfig saying to run Setup", err)
		}
		s.queue(t) // Setup, and drop at cleanup
		latest, err := sqlqueue.LatestSchemaVersion(b.dialect)
		if err != nil {
			t.Fatal(err)
		}
		setVersion := func(v int) {
			t.Helper()
			if _, err := db.ExecContext(t.Context(), "UPDATE "+s.table+"_meta SET value = '"+strconv.Itoa(v)+"' WHERE name = 'schema_version'"); err != nil {
				t.Fatal(err)
			}
		}
		for _, tc := range []struct {
			version int
			want    string
			setupOK bool
		}{
			{latest - 1, fmt.Sprintf("have schema version %d but this release needs %d", latest-1, latest), true},
			{latest + 1, fmt.Sprintf("have schema version %d, newer than this release of meridian knows (%d)", latest+1, latest), false},
		} {
			setVersion(tc.version)
			fresh, err := sqlqueue.New(db, sqlqueue.WithTable(s.table))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := fresh.Len(t.Context(), ""); !errors.Is(err, queue.ErrConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Len on version %d = %v, want an ErrConfig containing %q", tc.version, err, tc.want)
			}
			err = fresh.Setup(t.Context())
			if tc.setupOK && err != nil {
				t.Errorf("Setup over version %d: %v", tc.version, err)
			}
			if !tc.setupOK && (!errors.Is(err, queue.ErrConfig) || !strings.Contains(err.Error(), fmt.Sprintf("version %d, this release knows up to %d", tc.version, latest))) {
				t.Errorf("Setup over version %d = %v, want an ErrConfig naming both versions", tc.version, err)
			}
			if got, _, err := fresh.SchemaVersions(t.Context()); err != nil || (tc.setupOK && got != latest) {
				t.Errorf("after Setup over version %d the tables record %d, %v", tc.version, got, err)
			}
			setVersion(latest)
		}
	})
}

// TestSchemaDDL applies Schema's DDL the way a migration would, twice
// (it is idempotent), and uses the result.
func TestSchemaDDL(t *testing.T) {
	eachDialect(t, func(t *testing.T, b backend) {
		s := newStore(t, b)
		db := b.open(t, s.path)
		ddl, err := sqlqueue.Schema(b.dialect, sqlqueue.WithTable(s.table))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(ddl, s.table+"_meta") || !strings.Contains(ddl, "schema_version") {
			t.Fatalf("Schema does not create %s_meta with the version:\n%s", s.table, ddl)
		}
		for pass := range 2 {
			for _, stmt := range strings.Split(ddl, ";\n\n") {
				_, err := db.ExecContext(t.Context(), strings.TrimSuffix(strings.TrimSpace(stmt), ";"))
				if pass == 1 && err != nil && strings.Contains(stmt, "ADD COLUMN") && duplicateColumn(err) {
					continue // documented: skip on a second run
				}
				if pass == 1 && err != nil && (strings.Contains(stmt, "ADD KEY") || strings.Contains(stmt, "DROP KEY")) && indexDone(err) {
					continue // documented: MySQL's index swap and drop, skip on a second run
				}
				if err != nil {
					t.Fatalf("applying %q: %v", stmt, err)
				}
			}
		}
		q, err := sqlqueue.New(db, sqlqueue.WithTable(s.table))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = q.DropTables(context.Background()) })
		if err := q.Push(t.Context(), queue.Job{Name: "migrated"}); err != nil {
			t.Fatalf("Push after applying Schema: %v", err)
		}
		if n, err := q.Len(t.Context(), ""); err != nil || n != 1 {
			t.Fatalf("Len = %d, %v; want 1", n, err)
		}
	})
}

// TestAckDeletes checks the default retention: acked jobs are deleted, one
// by one and in batches, and AckMany reports exactly the lost leases.
func TestAckDeletes(t *testing.T) {
	eachDialect(t, func(t *testing.T, b backend) {
		q := newStore(t, b).queue(t)
		ctx := t.Context()
		for range 5 {
			if err := q.Push(ctx, queue.Job{Queue: "a", Name: "n"}); err != nil {
				t.Fatal(err)
			}
		}
		jobs, err := q.Reserve(ctx, []string{"a"}, 5, time.Minute)
		if err != nil || len(jobs) != 5 {
			t.Fatalf("Reserve = %d jobs, %v", len(jobs), err)
		}
		if err := testutil.Ack(ctx, q, jobs[0].Lease()); err != nil {
			t.Fatalf("Ack: %v", err)
		}
		if _, err := q.GetJob(ctx, jobs[0].ID); !errors.Is(err, queue.ErrNotFound) {
			t.Fatalf("GetJob of an acked job = %v, want ErrNotFound (deleted)", err)
		}
		stale := jobs[0].Lease()
		wrong := queue.Lease{JobID: jobs[1].ID, Token: "not-the-token"}
		leases := []queue.Lease{jobs[1].Lease(), stale, jobs[2].Lease(), wrong, jobs[3].Lease()}
		lost, err := testutil.AckMany(ctx, q, leases)
		if err != nil {
			t.Fatalf("AckMany: %v", err)
		}
		if !slices.Equal(lost, []queue.Lease{stale, wrong}) {
			t.Fatalf("AckMany lost = %v, want the stale and the wrong lease", lost)
		}
		if n, err := q.Len(ctx, "a"); err != nil || n != 1 {
			t.Fatalf("Len = %d, %v; want 1 (only the unacked job)", n, err)
		}
		if err := testutil.Ack(ctx, q, jobs[1].Lease()); !errors.Is(err, queue.ErrLeaseLost) {
			t.Fatalf("second Ack = %v, want ErrLeaseLost", err)
		}
	})
}

// TestMaintain checks retention pruning and that one process at a time is
// elected to run it.
func TestMaintain(t *testing.T) {
	eachDialect(t, func(t *testing.T, b backend) {
		s := newStore(t, b)
		opts := []sqlqueue.Option{sqlqueue.WithRetention(time.Hour, time.Hour)}
		q, db := s.open(t, opts...)
		peer := s.queue(t, opts...)
		ctx := t.Context()
		for _, name := range []string{"done", "dead", "waiting"} {
			if err := q.Push(ctx, queue.Job{ID: name + "-" + s.table, Queue: "m", Name: name}); err != nil {
				t.Fatal(err)
			}
		}
		jobs, err := q.Reserve(ctx, []string{"m"}, 2, time.Minute)
		if err != nil || len(jobs) != 2 {
			t.Fatalf("Reserve = %d, %v", len(jobs), err)
		}
		if err := testutil.Ack(ctx, q, jobs[0].Lease()); err != nil {
			t.Fatal(err)
		}
		if err := testutil.Fail(ctx, q, jobs[1].Lease(), "boom"); err != nil {
			t.Fatal(err)
		}
		if info, err := q.GetJob(ctx, jobs[0].ID); err != nil || info.State != queue.StateDone {
			t.Fatalf("acked job = %v, %v; want kept as done", info.State, err)
		}
		s.backdate(t, db, 2*time.Hour)
		leader, pruned, err := q.Maintain(ctx)
		if err != nil || !leader || pruned != 2 {
			t.Fatalf("Maintain = leader %v, pruned %d, %v; want leader, 2 pruned", leader, pruned, err)
		}
		if leader, _, err := peer.Maintain(ctx); err != nil || leader {
			t.Fatalf("peer Maintain while the lease is held = leader %v, %v; want not leader", leader, err)
		}
		for _, j := range jobs {
			if _, err := q.GetJob(ctx, j.ID); !errors.Is(err, queue.ErrNotFound) {
				t.Errorf("GetJob(%s) after pruning = %v, want ErrNotFound", j.ID, err)
			}
		}
		if n, err := q.Len(ctx, "m"); err != nil || n != 1 {
			t.Fatalf("Len = %d, %v; the waiting job must survive maintenance", n, err)
		}
		// The counts follow the pruning (the triggers count deletes).
		counts, err := q.Counts(ctx)
		want := []queue.QueueCounts{{Queue: "m", Pending: 1, Ready: queue.Count{N: 1}}}
		if err != nil || fmt.Sprint(counts) != fmt.Sprint(want) {
			t.Fatalf("Counts after pruning = %v, %v; want %v", counts, err, want)
		}
	})
}

// TestMaintainPrunesEveryQueue checks that the prune, which steps
// through the queues on the list index, deletes the finished jobs (done,
// cancelled, dead) of every queue older than their retention and keeps
// the newer ones: queue a has more old jobs than its share of a batch.
func TestMaintainPrunesEveryQueue(t *testing.T) {
	eachDialect(t, func(t *testing.T, b backend) {
		keep := time.Hour
		s := newStore(t, b)
		q, db := s.open(t, sqlqueue.WithRetention(keep, keep))
		ctx := t.Context()
		// finish pushes n jobs to name and acks them (done), fails them
		// (dead) or cancels them while they wait (cancelled).
		finish := func(name string, n int, how string) {
			t.Helper()
			jobs := make([]queue.Job, n)
			for i := range jobs {
				jobs[i] = queue.Job{ID: queue.NewID(), Queue: name, Name: how}
			}
			if _, err := q.PushMany(ctx, jobs); err != nil {
				t.Fatal(err)
			}
			if how == "cancel" {
				for _, j := range jobs {
					if _, err := q.Cancel(ctx, j.ID); err != nil {
						t.Fatal(err)
					}
				}
				return
			}
			for left := n; left > 0; {
				got, err := q.Reserve(ctx, []string{name}, left, time.Minute)
				if err != nil || len(got) == 0 {
					t.Fatalf("Reserve = %d, %v", len(got), err)
				}
				left -= len(got)
				leases := make([]queue.Lease, len(got))
				for i, j := range got {
					leases[i] = j.Lease()
				}
				if how == "ack" {
					if lost, err := testutil.AckMany(ctx, q, leases); err != nil || len(lost) > 0 {
						t.Fatalf("AckMany = %v, %v", lost, err)
					}
					continue
				}
				for _, l := range leases {
					if err := testutil.Fail(ctx, q, l, "boom"); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
		finish("a", 400, "ack")
		finish("a", 1, "fail")
		finish("b", 3, "ack")
		finish("c", 2, "cancel")
		s.backdate(t, db, keep+time.Minute)
		finish("b", 2, "ack")
		finish("c", 2, "ack")
		finish("c", 1, "fail")
		finish("b", 1, "cancel")
		leader, pruned, err := q.Maintain(ctx)
		if err != nil || !leader || pruned != 406 {
			t.Fatalf("Maintain = leader %v, pruned %d, %v; want leader, 406 pruned", leader, pruned, err)
		}
		counts, err := q.Counts(ctx)
		want := []queue.QueueCounts{{Queue: "b", Done: 2, Cancelled: 1}, {Queue: "c", Done: 2, Dead: 1}}
		if err != nil || fmt.Sprint(counts) != fmt.Sprint(want) {
			t.Fatalf("Counts after pruning = %v, %v; want %v", counts, err, want)
		}
	})
}

// TestMetricsAcrossHandles checks that run records are aggregated per
// queue and minute, written with the next ack, and read by another handle
// as another process would.
func TestMetricsAcrossHandles(t *testing.T) {
	eachDialect(t, func(t *testing.T, b backend) {
		s := newStore(t, b)
		q, peer := s.queue(t), s.queue(t)
		ctx := t.Context()
		start := time.Now().Truncate(time.Minute).Add(time.Second)
		for _, r := range []queue.RunRecord{
			{Queue: "mx", Start: start, Runtime: 10 * time.Millisecond, Wait: time.Second, Outcome: queue.OutcomeDone},
			{Queue: "mx", Start: start, Runtime: 30 * time.Millisecond, Wait: time.Second, Outcome: queue.OutcomeDone},
			{Queue: "mx", Start: start, Runtime: 20 * time.Millisecond, Outcome: queue.OutcomeFailed},
		} {
			q.ObserveRun(r)
		}
		if err := q.Push(ctx, queue.Job{Queue: "mx", Name: "n"}); err != nil {
			t.Fatal(err)
		}
		jobs, err := q.Reserve(ctx, []string{"mx"}, 1, time.Minute)
		if err != nil || len(jobs) != 1 {
			t.Fatal(err)
		}
		if _, err := testutil.AckMany(ctx, q, []queue.Lease{jobs[0].Lease()}); err != nil {
			t.Fatal(err)
		}
		q.ObserveRun(queue.RunRecord{Queue: "mx", Start: start, Runtime: 5 * time.Millisecond, Outcome: queue.OutcomeRetried})
		if err := q.FlushMetrics(ctx); err != nil {
			t.Fatal(err)
		}
		points, err := peer.Metrics(ctx, start.Add(-time.Minute))
		if err != nil || len(points) != 1 {
			t.Fatalf("Metrics = %+v, %v; want one point", points, err)
		}
		p := points[0]
		if p.Queue != "mx" || !p.Minute.Equal(start.Truncate(time.Minute)) || p.Processed != 2 || p.Failed != 2 ||
			p.TotalRuntime != 65*time.Millisecond || p.MaxRuntime != 30*time.Millisecond || p.TotalWait != 2*time.Second {
			t.Fatalf("Metrics point = %+v", p)
		}
		stats, err := peer.QueueStats(ctx)
		if err != nil || len(stats) != 1 || stats[0].Processed != 2 || stats[0].Failed != 2 || stats[0].MaxRuntime != 30*time.Millisecond {
			t.Fatalf("QueueStats = %+v, %v", stats, err)
		}
		// Two successes in the last queue.RateWindow (five minutes and
		// part of the current one).
		if r := stats[0].JobsPerMinute; r < 2.0/6 || r > 2.0/5 {
			t.Fatalf("JobsPerMinute = %v, want 2 over 5 to 6 minutes", r)
		}
	})
}

// TestSearchPayload checks the bounded payload search.
func TestSearchPayload(t *testing.T) {
	eachDialect(t, func(t *testing.T, b backend) {
		q := newStore(t, b).queue(t)
		ctx := t.Context()
		for _, p := range []string{`{"user":"ada"}`, `{"user":"grace"}`, "\x00binary ada\xff", `{"user":"Ada"}`} {
			if err := q.Push(ctx, queue.Job{Queue: "s", Name: "n", Payload: []byte(p)}); err != nil {
				t.Fatal(err)
			}
		}
		page, err := q.ListJobs(ctx, queue.JobFilter{State: queue.StateReady, Search: "ada"})
		if err != nil {
			t.Fatalf("ListJobs: %v", err)
		}
		var got []string
		for _, j := range page.Jobs {
			got = append(got, string(j.Payload))
		}
		if want := []string{`{"user":"ada"}`, "\x00binary ada\xff"}; !slices.Equal(got, want) {
			t.Fatalf("search ada = %q, want %q (case-sensitive, bytes)", got, want)
		}
		if _, err := q.ListJobs(ctx, queue.JobFilter{State: queue.StateReady, After: "not-a-cursor"}); err == nil {
			t.Fatalf("ListJobs with a bad cursor: no error")
		}
		if _, err := q.ListJobs(ctx, queue.JobFilter{State: "limbo"}); err == nil {
			t.Fatalf("ListJobs of an unknown state: no error")
		}
	})
}

// TestRepushCreatedAt checks CreatedAt on re-push: a dead letter pushed
// back without one keeps its own, a finished job's ID starts a new job.
func TestRepushCreatedAt(t *testing.T) {
	eachDialect(t, func(t *testing.T, b backend) {
		q := newStore(t, b).queue(t, sqlqueue.WithRetention(time.Hour, time.Hour))
		ctx := t.Context()
		first := time.Now().Add(-time.Hour).Truncate(time.Microsecond)
		dead := queue.Job{ID: queue.NewID(), Queue: "rc", Name: "dead", CreatedAt: first}
		done := queue.Job{ID: queue.NewID(), Queue: "rc", Name: "done", CreatedAt: first}
		for _, j := range []queue.Job{dead, done} {
			if err := q.Push(ctx, j); err != nil {
				t.Fatal(err)
			}
		}
		jobs, err := q.Reserve(ctx, []string{"rc"}, 2, time.Minute)
		if err != nil || len(jobs) != 2 {
			t.Fatalf("Reserve = %d, %v", len(jobs), err)
		}
		if err := testutil.Fail(ctx, q, jobs[0].Lease(), "x"); err != nil {
			t.Fatal(err)
		}
		if err := testutil.Ack(ctx, q, jobs[1].Lease()); err != nil {
			t.Fatal(err)
		}
		before := time.Now()
		for _, j := range []queue.Job{{ID: dead.ID, Queue: "rc", Name: "dead"}, {ID: done.ID, Queue: "rc", Name: "done"}} {
			if err := q.Push(ctx, j); err != nil {
				t.Fatalf("re-push of %s: %v", j.Name, err)
			}
		}
		d, err := q.GetJob(ctx, dead.ID)
		if err != nil || d.State != queue.StateReady || !d.CreatedAt.Equal(first) {
			t.Errorf("revived dead letter: %v created %v, %v; want ready, created %v", d.State, d.CreatedAt, err, first)
		}
		n, err := q.GetJob(ctx, done.ID)
		if err != nil || n.State != queue.StateReady || n.CreatedAt.Before(before) {
			t.Errorf("re-pushed finished job: %v created %v, %v; want ready, created now", n.State, n.CreatedAt, err)
		}
	})
}

// duplicateColumn reports SQLite's and MySQL's "column exists" errors.
// indexDone reports MySQL's "duplicate key name" (1061) and "can't drop,
// check that it exists" (1091): an index change that was already made.
func indexDone(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "Error 1061 ") || strings.Contains(msg, "Error 1091 ")
}

func duplicateColumn(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "duplicate column name") || strings.Contains(msg, "Error 1060 ")
}
