package sqlqueue_test

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/meridianjobs/meridian/internal/testutil"
	queue "github.com/meridianjobs/meridian/queue/driver"
	"github.com/meridianjobs/meridian/sqlqueue"
)

// TestCountsDoNotSerialiseWriters checks that the counts the triggers keep
// make no transaction wait for another: a transaction that dispatched a
// job and stays open does not hold up pushes, acks and fails of the same
// queue on other connections. SQLite, with one writer, is left out. The
// maintenance pass then folds every connection's counts into one row per
// queue and state without changing them.
func TestCountsDoNotSerialiseWriters(t *testing.T) {
	eachDialect(t, func(t *testing.T, b backend) {
		if b.dialect == sqlqueue.SQLite {
			t.Skip("SQLite has one writer: a write transaction holds every other")
		}
		s := newStore(t, b)
		q, db := s.open(t, sqlqueue.WithRetention(time.Hour, 0))
		ctx := t.Context()
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		if err := q.Tx(tx).Push(ctx, queue.Job{Queue: "c", Name: "in-tx"}); err != nil {
			t.Fatal(err)
		}

		// Meanwhile, on other connections, within a deadline a wait on
		// the open transaction would pass.
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		for i := range 3 {
			if err := q.Push(wctx, queue.Job{Queue: "c", Name: fmt.Sprint("outside-", i)}); err != nil {
				t.Fatalf("Push beside an open transaction that pushed to the same queue: %v", err)
			}
		}
		jobs, err := q.Reserve(wctx, []string{"c"}, 2, time.Minute)
		if err != nil || len(jobs) != 2 {
			t.Fatalf("Reserve = %d jobs, %v", len(jobs), err)
		}
		if err := testutil.Ack(wctx, q, jobs[0].Lease()); err != nil {
			t.Fatalf("Ack beside the open transaction: %v", err)
		}
		if err := testutil.Fail(wctx, q, jobs[1].Lease(), "boom"); err != nil {
			t.Fatalf("Fail beside the open transaction: %v", err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}

		want := fmt.Sprint([]queue.QueueCounts{{Queue: "c", Pending: 2, Ready: queue.Count{N: 2}, Dead: 1, Done: 1}})
		if got, err := q.Counts(ctx); err != nil || fmt.Sprint(got) != want {
			t.Fatalf("Counts = %v, %v; want %s", got, err, want)
		}
		if leader, _, err := q.Maintain(ctx); err != nil || !leader {
			t.Fatalf("Maintain = leader %v, %v", leader, err)
		}
		var shards int
		if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+s.table+"_counts WHERE shard <> 0").Scan(&shards); err != nil {
			t.Fatal(err)
		}
		if shards != 0 {
			t.Errorf("%d counter rows of connections left after maintenance, want all folded into shard 0", shards)
		}
		if got, err := q.Counts(ctx); err != nil || fmt.Sprint(got) != want {
			t.Fatalf("Counts after folding = %v, %v; want %s", got, err, want)
		}
	})
}

// TestCountsOfBatchAcks checks the counts of jobs that batch acks finish
// (counted by the triggers, but on MariaDB, where an ack that deletes
// counts its own jobs and the delete trigger skips them) and of everything
// around them (the triggers, which must still count on every connection
// afterwards), deleted or kept, against the jobs table itself, including a
// batch with a lost lease. With one connection, every statement after an
// ack runs on the connection the ack used, so an ack that left the
// trigger skipping that session's deletes shows here.
func TestCountsOfBatchAcks(t *testing.T) {
	for _, tc := range []struct {
		name  string
		keep  time.Duration
		conns int
	}{{"delete", 0, 0}, {"keep", time.Hour, 0}, {"delete/one-connection", 0, 1}} {
		t.Run(tc.name, func(t *testing.T) {
			eachDialect(t, func(t *testing.T, b backend) {
				s := newStore(t, b)
				q, db := s.open(t, sqlqueue.WithRetention(tc.keep, 0))
				if tc.conns > 0 && b.dialect == sqlqueue.MySQL {
					db.SetMaxOpenConns(tc.conns)
				}
				ctx := t.Context()
				for _, name := range []string{"a", "b", "a", "b", "a", "b", "a", "b", "a", "c"} {
					if err := q.Push(ctx, queue.Job{Queue: name, Name: "n"}); err != nil {
						t.Fatal(err)
					}
				}
				held, err := q.Reserve(ctx, []string{"a", "b"}, 6, time.Minute)
				if err != nil || len(held) != 6 {
					t.Fatalf("Reserve = %d jobs, %v", len(held), err)
				}
				pre, err := q.ReserveUnstarted(ctx, []string{"a", "b"}, 2, time.Minute)
				if err != nil || len(pre) != 2 {
					t.Fatalf("ReserveUnstarted = %d jobs, %v", len(pre), err)
				}
				stale := queue.Lease{JobID: held[3].ID, Token: held[3].LeaseToken + "x"}
				if _, _, err := testutil.StartAck(ctx, q, []queue.Lease{pre[0].Lease(), pre[1].Lease()}, []queue.Lease{held[0].Lease(), held[1].Lease(), stale}); err != nil {
					t.Fatal(err)
				}
				if _, err := testutil.AckMany(ctx, q, []queue.Lease{held[2].Lease(), pre[0].Lease()}); err != nil {
					t.Fatal(err)
				}
				// Two leases naming each other's current tokens finish
				// nothing (the by-token statements roll back and the exact
				// ones run) and count nothing.
				swapped := []queue.Lease{{JobID: held[5].ID, Token: pre[1].LeaseToken}, {JobID: pre[1].ID, Token: held[5].LeaseToken}}
				if lost, err := testutil.AckMany(ctx, q, swapped); err != nil || len(lost) != 2 {
					t.Fatalf("AckMany of swapped tokens = %d lost, %v; want 2 lost", len(lost), err)
				}
				if lost, err := testutil.AckMany(ctx, q, []queue.Lease{held[5].Lease(), pre[1].Lease()}); err != nil || len(lost) != 0 {
					t.Fatalf("AckMany after swapped tokens = %d lost, %v; want none lost", len(lost), err)
				}
				// Statements the triggers count, on whichever connections.
				for range 3 {
					if err := q.Push(ctx, queue.Job{Queue: "c", Name: "n"}); err != nil {
						t.Fatal(err)
					}
				}
				if err := testutil.Ack(ctx, q, held[3].Lease()); err != nil {
					t.Fatal(err)
				}
				if err := testutil.Fail(ctx, q, held[4].Lease(), "boom"); err != nil {
					t.Fatal(err)
				}
				if _, err := q.Purge(ctx, "c"); err != nil {
					t.Fatal(err)
				}

				got, err := q.Counts(ctx)
				if err != nil {
					t.Fatal(err)
				}
				have := map[string]int64{}
				for _, c := range got {
					have[c.Queue+"/pending"], have[c.Queue+"/done"], have[c.Queue+"/dead"] = c.Pending, c.Done, c.Dead
				}
				want := queryCounts(t, db, "SELECT queue, state, COUNT(*) FROM "+s.table+" GROUP BY queue, state")
				for k, n := range want {
					if have[k] != n {
						t.Errorf("count %s = %d, the table holds %d (all counts %v)", k, have[k], n, got)
					}
				}
				for k, n := range have {
					if want[k] != n {
						t.Errorf("count %s = %d, the table holds %d (all counts %v)", k, n, want[k], got)
					}
				}
			})
		})
	}
}

// lastCountingMigration is, per dialect, the newest migration that changed
// how jobs are counted.
var lastCountingMigration = map[sqlqueue.Dialect]int{
	sqlqueue.Postgres: 23, // 0023_uncounted_claims
	sqlqueue.MySQL:    22, // 0022_ack_counts
	sqlqueue.SQLite:   10, // 0010_count_inserts
}

// TestCountsAcrossTheLastMigration checks that the counts stay exact when
// the newest migration that changed counting is applied to a filled table,
// and undone and applied again: the states and the scheduled buckets of
// jobs counted before it, changed by statements between the two versions,
// and changed after it.
func TestCountsAcrossTheLastMigration(t *testing.T) {
	eachDialect(t, func(t *testing.T, b backend) {
		ctx := t.Context()
		s := newStore(t, b)
		q, db := s.open(t, sqlqueue.WithRetention(time.Hour, time.Hour))
		latest := lastCountingMigration[b.dialect]
		if latest == 0 {
			t.Fatalf("no counting migration known for %s", b.dialect)
		}
		now := time.Now()
		hour := func(n int) time.Time { return now.Add(time.Duration(n) * time.Hour) }
		var js []queue.Job
		add := func(queueName, prefix string, n int, at time.Time) {
			for i := range n {
				js = append(js, queue.Job{ID: fmt.Sprintf("%s-%d", prefix, i), Queue: queueName, Name: "n", AvailableAt: at})
			}
		}
		add("cm-a", "ra", 30, time.Time{})
		add("cm-b", "rb", 20, time.Time{})
		add("cm-a", "sa1", 12, hour(1))
		add("cm-b", "sb2", 8, hour(2))
		add("cm-a", "sa3", 5, hour(3))
		if _, err := q.PushMany(ctx, js); err != nil {
			t.Fatal(err)
		}
		held, err := q.Reserve(ctx, []string{"cm-a"}, 10, time.Hour)
		if err != nil || len(held) != 10 {
			t.Fatalf("Reserve = %d jobs, %v", len(held), err)
		}
		if lost, err := testutil.AckMany(ctx, q, []queue.Lease{held[0].Lease(), held[1].Lease(), held[2].Lease(), held[3].Lease()}); err != nil || len(lost) != 0 {
			t.Fatalf("AckMany = %v, %v", lost, err)
		}
		for _, j := range held[4:7] {
			if err := testutil.Fail(ctx, q, j.Lease(), "boom"); err != nil {
				t.Fatal(err)
			}
		}
		checkCounts(t, q, db, s.table, "before the migration")

		// One version back, the rows stay; statements made there are
		// counted by that version's triggers.
		if _, got, err := q.MigrateDown(ctx, latest-1); err != nil || got != latest-1 {
			t.Fatalf("MigrateDown(%d) = %d, %v", latest-1, got, err)
		}
		for _, stmt := range []string{
			// Three scheduled jobs of cm-a come due, and cm-b's move an hour on.
			fmt.Sprintf("UPDATE %s SET run_at = %d WHERE id IN ('sa1-0', 'sa1-1', 'sa3-0')", s.table, hour(-1).UnixMicro()),
			fmt.Sprintf("UPDATE %s SET run_at = run_at + 3600000000 WHERE queue = 'cm-b' AND run_at > updated_at", s.table),
			fmt.Sprintf("DELETE FROM %s WHERE id IN ('rb-0', 'rb-1', 'rb-2', 'rb-3', 'rb-4', 'sb2-0')", s.table),
			fmt.Sprintf("UPDATE %s SET state = 'dead' WHERE id IN ('rb-5', 'rb-6')", s.table),
		} {
			if _, err := db.ExecContext(ctx, stmt); err != nil {
				t.Fatalf("%s: %v", stmt, err)
			}
		}
		if err := q.Setup(ctx); err != nil {
			t.Fatal(err)
		}
		checkCounts(t, q, db, s.table, "after the migration")

		// And after it: delays, retries into a later bucket, claims of due
		// scheduled jobs, acks, fails, a dead letter retried.
		js = js[:0]
		add("cm-a", "la", 6, hour(2))
		if _, err := q.PushMany(ctx, js); err != nil {
			t.Fatal(err)
		}
		more, err := q.Reserve(ctx, []string{"cm-a", "cm-b"}, 30, time.Hour)
		if err != nil || len(more) != 30 {
			t.Fatalf("Reserve = %d jobs, %v", len(more), err)
		}
		for _, j := range more[:3] {
			if err := testutil.Nack(ctx, q, j.Lease(), hour(1), "later"); err != nil {
				t.Fatal(err)
			}
		}
		var acks []queue.Lease
		for _, j := range more[3:20] {
			acks = append(acks, j.Lease())
		}
		if lost, err := testutil.AckMany(ctx, q, acks); err != nil || len(lost) != 0 {
			t.Fatalf("AckMany = %v, %v", lost, err)
		}
		if err := testutil.Fail(ctx, q, more[20].Lease(), "boom"); err != nil {
			t.Fatal(err)
		}
		if err := q.RetryDead(ctx, "rb-5"); err != nil {
			t.Fatal(err)
		}
		checkCounts(t, q, db, s.table, "after later changes")

		// Down and up again.
		if _, _, err := q.MigrateDown(ctx, latest-1); err != nil {
			t.Fatal(err)
		}
		if err := q.Setup(ctx); err != nil {
			t.Fatal(err)
		}
		checkCounts(t, q, db, s.table, "after the migration was undone and applied again")
	})
}

// checkCounts compares q's counts of each queue's pending, scheduled,
// done, dead and cancelled jobs with those the table holds.
func checkCounts(t *testing.T, q *sqlqueue.Queue, db *sql.DB, table, when string) {
	t.Helper()
	ctx := t.Context()
	got, err := q.Counts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]int64{}
	for _, c := range got {
		have[c.Queue+"/pending"], have[c.Queue+"/done"], have[c.Queue+"/dead"] = c.Pending, c.Done, c.Dead
		have[c.Queue+"/cancelled"], have[c.Queue+"/scheduled"] = c.Cancelled, c.Scheduled.N
	}
	want := queryCounts(t, db, fmt.Sprintf(`SELECT queue, state, COUNT(*) FROM %s GROUP BY queue, state
UNION ALL SELECT queue, 'scheduled', COUNT(*) FROM %s WHERE state = 'pending' AND run_at > %d GROUP BY queue`, table, table, time.Now().UnixMicro()))
	maps.DeleteFunc(have, func(_ string, n int64) bool { return n == 0 })
	if !maps.Equal(have, want) {
		t.Errorf("%s: counts %v, the table holds %v", when, have, want)
	}
}

// TestCountsOfEveryChange checks the counts table against the jobs table
// after each kind of statement that changes jobs: every state's count
// through Counts, and each queue's scheduled buckets that Counts reads
// (the jobs written to run later, pending with run_at after updated_at, by
// five-minute bucket of run_at, the buckets after the current one) row by
// row. The store's triggers count every write but PostgreSQL's claims
// (MySQL's migration 0018, SQLite's 0012, PostgreSQL's 0023), so a
// statement whose change they miss (a queue, state or bucket change their
// conditions skip) shows here.
func TestCountsOfEveryChange(t *testing.T) {
	eachDialect(t, func(t *testing.T, b backend) {
		s := newStore(t, b)
		q, db := s.open(t, sqlqueue.WithRetention(time.Hour, time.Hour))
		ctx := t.Context()
		now := time.Now()
		in := func(d time.Duration) time.Time { return now.Add(d) }
		step := func(what string, fn func() error) {
			t.Helper()
			if err := fn(); err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			checkCounts(t, q, db, s.table, "after "+what)
			checkBuckets(t, db, s.table, "after "+what)
		}
		var js []queue.Job
		for i := range 12 {
			js = append(js, queue.Job{ID: fmt.Sprintf("a%d", i), Queue: "ce-a", Name: "n"})
			js = append(js, queue.Job{ID: fmt.Sprintf("s%d", i), Queue: "ce-a", Name: "n", AvailableAt: in(time.Duration(i+1) * 10 * time.Minute)})
		}
		for i := range 6 {
			js = append(js, queue.Job{ID: fmt.Sprintf("b%d", i), Queue: "ce-b", Name: "n", UniqueKey: fmt.Sprintf("k%d", i)})
		}
		step("a push", func() error { _, err := q.PushMany(ctx, js); return err })

		var held []queue.Job
		step("a claim", func() (err error) {
			held, err = q.Reserve(ctx, []string{"ce-a"}, 10, time.Hour)
			if err == nil && len(held) != 10 {
				err = fmt.Errorf("claimed %d jobs, want 10", len(held))
			}
			return err
		})
		step("an ack", func() error { return testutil.Ack(ctx, q, held[0].Lease()) })
		step("a batch ack", func() error {
			_, err := testutil.AckMany(ctx, q, []queue.Lease{held[1].Lease(), held[2].Lease()})
			return err
		})
		step("a nack to later", func() error { return testutil.Nack(ctx, q, held[3].Lease(), in(3*time.Hour), "later") })
		step("a nack to now", func() error { return testutil.Nack(ctx, q, held[4].Lease(), time.Time{}, "again") })
		step("a snooze", func() error {
			return testutil.Complete(ctx, q, queue.Completion{Lease: held[5].Lease(), Outcome: queue.OutcomeSnoozed, At: in(90 * time.Minute)})
		})
		step("an extension", func() error { return testutil.Extend(ctx, q, held[6].Lease(), time.Hour) })
		step("a fail", func() error { return testutil.Fail(ctx, q, held[7].Lease(), "boom") })
		step("a chained ack", func() error {
			return testutil.Complete(ctx, q, queue.Completion{Lease: held[8].Lease(), Outcome: queue.OutcomeDone,
				Push: []queue.Job{{ID: "next", Queue: "ce-b", Name: "n", AvailableAt: in(4 * time.Hour)}}})
		})
		step("a chained fail", func() error {
			return testutil.Complete(ctx, q, queue.Completion{Lease: held[9].Lease(), Outcome: queue.OutcomeFailed, Reason: "boom"})
		})
		step("a cancel of a waiting job", func() error { _, err := q.Cancel(ctx, "a11"); return err })
		step("a cancel of a scheduled job", func() error { _, err := q.Cancel(ctx, "s11"); return err })
		step("a retry of a dead letter", func() error { return q.RetryDead(ctx, held[7].ID) })
		step("a replacing push", func() error {
			return q.Push(ctx, queue.Job{ID: "b0r", Queue: "ce-b", Name: "n", UniqueKey: "k0", UniqueReplace: true, AvailableAt: in(time.Hour)})
		})
		step("a push reviving a finished job", func() error {
			return q.Push(ctx, queue.Job{ID: held[0].ID, Queue: "ce-b", Name: "n", AvailableAt: in(2 * time.Hour)})
		})
		step("a bulk cancel", func() error {
			_, err := q.ActOn(ctx, queue.JobFilter{State: queue.StateScheduled, Queue: "ce-a"}, queue.BulkCancel, 3, queue.Action{})
			return err
		})
		more, err := q.Reserve(ctx, []string{"ce-b"}, 4, time.Hour)
		if err != nil || len(more) != 4 {
			t.Fatalf("Reserve = %d jobs, %v", len(more), err)
		}
		for _, j := range more {
			if err := testutil.Fail(ctx, q, j.Lease(), "boom"); err != nil {
				t.Fatal(err)
			}
		}
		step("a bulk retry", func() error {
			_, err := q.ActOn(ctx, queue.JobFilter{State: queue.StateDead, Queue: "ce-b"}, queue.BulkRetry, 2, queue.Action{})
			return err
		})
		step("a forget", func() error { return q.ForgetDead(ctx, held[9].ID) })
		step("a bulk forget", func() error {
			_, err := q.ActOn(ctx, queue.JobFilter{State: queue.StateDead, Queue: "ce-b"}, queue.BulkForget, 1, queue.Action{})
			return err
		})
		step("a flush", func() error { _, err := q.FlushDead(ctx, ""); return err })
		step("a batch and its cancel", func() error {
			if _, err := q.PushBatch(ctx, queue.BatchRecord{ID: "bt"}, []queue.Job{{Queue: "ce-c", Name: "n"}, {Queue: "ce-c", Name: "n", AvailableAt: in(time.Hour)}}); err != nil {
				return err
			}
			_, err := q.CancelBatch(ctx, "bt")
			return err
		})
		step("a purge", func() error { _, err := q.Purge(ctx, "ce-a"); return err })
		// A job written to run later, claimed once it is due: its bucket
		// loses it.
		step("a claim of a job that came due", func() error {
			if err := q.Push(ctx, queue.Job{ID: "soon", Queue: "ce-d", Name: "n", AvailableAt: time.Now().Add(20 * time.Millisecond)}); err != nil {
				return err
			}
			checkBuckets(t, db, s.table, "after a push to run soon")
			var err error
			if !testutil.WaitFor(10*time.Second, func() bool {
				var got []queue.Job
				got, err = q.Reserve(ctx, []string{"ce-d"}, 1, time.Hour)
				return err != nil || len(got) == 1
			}) {
				return fmt.Errorf("the job was not claimed once due")
			}
			return err
		})
	})
}

// checkBuckets compares the scheduled buckets of the counts table (the
// sum of each queue's shards) that Counts reads, those after the current
// one, with the jobs table's pending jobs written to run later, by
// five-minute bucket of run_at. The current bucket and those before it
// are left out: a claim takes jobs out of them only, and PostgreSQL's
// claims are not counted (see TestClaimsLeaveTheirBucket).
func checkBuckets(t *testing.T, db *sql.DB, table, when string) {
	t.Helper()
	current := time.Now().UnixMicro() / 300_000_000
	rows, err := db.QueryContext(t.Context(), fmt.Sprintf("SELECT queue, run_at FROM %s WHERE state = 'pending' AND run_at > updated_at AND run_at >= %d",
		table, (current+1)*300_000_000))
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	want := map[string]int64{}
	for rows.Next() {
		var name string
		var at int64
		if err := rows.Scan(&name, &at); err != nil {
			t.Fatal(err)
		}
		want[fmt.Sprintf("%s/at:%d", name, at/300_000_000)]++
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	have := queryCounts(t, db, "SELECT queue, state, SUM(n) FROM "+table+"_counts WHERE state LIKE 'at:%' GROUP BY queue, state HAVING SUM(n) <> 0")
	maps.DeleteFunc(have, func(k string, _ int64) bool {
		var b int64
		_, err := fmt.Sscanf(k[strings.LastIndex(k, "/at:")+len("/at:"):], "%d", &b)
		return err == nil && b <= current
	})
	if !maps.Equal(have, want) {
		t.Errorf("%s: scheduled buckets %v, the table holds %v", when, have, want)
	}
}

// queryCounts runs query, whose rows are a queue, a state and a number,
// and returns the numbers by "queue/state".
func queryCounts(t *testing.T, db *sql.DB, query string) map[string]int64 {
	t.Helper()
	rows, err := db.QueryContext(t.Context(), query)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var name, state string
		var n int64
		if err := rows.Scan(&name, &state, &n); err != nil {
			t.Fatal(err)
		}
		out[name+"/"+state] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestClaimsLeaveTheirBucket checks what a claim does to the scheduled
// buckets, and that the maintenance pass drops the rows of buckets long
// past: a job written to run later and claimed once due leaves its bucket
// on MySQL and SQLite, whose triggers count the claim, and stays in it on
// PostgreSQL, whose claim no trigger counts (pgUncounted, migration 0023);
// Counts is right on each, and the bucket's rows are gone after Maintain.
func TestClaimsLeaveTheirBucket(t *testing.T) {
	eachDialect(t, func(t *testing.T, b backend) {
		s := newStore(t, b)
		q, db := s.open(t)
		ctx := t.Context()
		now := time.Now()
		if err := q.Push(ctx, queue.Job{ID: "later", Queue: "cb", Name: "n", AvailableAt: now.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		// Written three hours ago to run two hours ago: due, still in the
		// bucket of its run_at (this update is counted on every store),
		// which the maintenance pass drops (more than an hour past).
		runAt := now.Add(-2 * time.Hour).UnixMicro()
		if _, err := db.ExecContext(ctx, fmt.Sprintf("UPDATE %s SET run_at = %d, updated_at = %d WHERE id = 'later'",
			s.table, runAt, now.Add(-3*time.Hour).UnixMicro())); err != nil {
			t.Fatal(err)
		}
		bucket := fmt.Sprintf("cb/at:%d", runAt/300_000_000)
		buckets := func() map[string]int64 {
			t.Helper()
			return queryCounts(t, db, "SELECT queue, state, SUM(n) FROM "+s.table+"_counts WHERE state LIKE 'at:%' GROUP BY queue, state")
		}
		if got := buckets(); got[bucket] != 1 {
			t.Fatalf("before the claim: buckets %v, want %s = 1", got, bucket)
		}
		held, err := q.Reserve(ctx, []string{"cb"}, 1, time.Hour)
		if err != nil || len(held) != 1 {
			t.Fatalf("Reserve = %d jobs, %v", len(held), err)
		}
		want := int64(0)
		if b.dialect == sqlqueue.Postgres {
			want = 1
		}
		if got := buckets(); got[bucket] != want {
			t.Errorf("after the claim: buckets %v, want %s = %d", got, bucket, want)
		}
		checkCounts(t, q, db, s.table, "after the claim")
		if leader, _, err := q.Maintain(ctx); err != nil || !leader {
			t.Fatalf("Maintain = %v, %v", leader, err)
		}
		if err := testutil.Ack(ctx, q, held[0].Lease()); err != nil {
			t.Fatal(err)
		}
		if got := buckets(); len(got) != 0 {
			t.Errorf("after Maintain and the ack: buckets %v, want none", got)
		}
		checkCounts(t, q, db, s.table, "after the ack")
	})
}

// TestPruneScheduledCounts checks which bucket rows the maintenance pass
// drops: every row of a bucket more than an hour past, whatever it holds
// and whichever shard it is in, and the rows left at zero; the buckets of
// the last hour and those to come keep what they hold.
func TestPruneScheduledCounts(t *testing.T) {
	eachDialect(t, func(t *testing.T, b backend) {
		s := newStore(t, b)
		q, db := s.open(t)
		ctx := t.Context()
		if err := q.Setup(ctx); err != nil {
			t.Fatal(err)
		}
		current := time.Now().UnixMicro() / 300_000_000
		rows := []struct {
			bucket, shard, n int64
		}{
			{current - 13, 4242, 3}, // past the hour, in a shard
			{current - 13, 0, -1},
			{current - 30, 0, 2},
			{current - 11, 0, 2}, // within the hour
			{current, 0, 1},
			{current + 3, 0, 0}, // zero
			{current + 4, 0, 5},
		}
		for _, r := range rows {
			if _, err := db.ExecContext(ctx, fmt.Sprintf("INSERT INTO %s_counts (queue, state, shard, n) VALUES ('pc', 'at:%d', %d, %d)",
				s.table, r.bucket, r.shard, r.n)); err != nil {
				t.Fatal(err)
			}
		}
		if leader, _, err := q.Maintain(ctx); err != nil || !leader {
			t.Fatalf("Maintain = %v, %v", leader, err)
		}
		got := queryCounts(t, db, "SELECT queue, state, SUM(n) FROM "+s.table+"_counts WHERE state LIKE 'at:%' GROUP BY queue, state")
		want := map[string]int64{
			fmt.Sprintf("pc/at:%d", current-11): 2,
			fmt.Sprintf("pc/at:%d", current):    1,
			fmt.Sprintf("pc/at:%d", current+4):  5,
		}
		if !maps.Equal(got, want) {
			t.Errorf("after Maintain: buckets %v, want %v", got, want)
		}
	})
}
