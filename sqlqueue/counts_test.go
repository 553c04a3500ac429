package sqlqueue_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/meridianjobs/meridian/queue"
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
		if err := q.Ack(wctx, jobs[0].Lease()); err != nil {
			t.Fatalf("Ack beside the open transaction: %v", err)
		}
		if err := q.Fail(wctx, jobs[1].Lease(), "boom"); err != nil {
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
// (AckMany and StartAck count them per statement; the row triggers skip
// them) and of everything around them (the triggers, which must still
// count on every connection afterwards), deleted or kept, against the jobs
// table itself, including a batch with a lost lease.
func TestCountsOfBatchAcks(t *testing.T) {
	for _, tc := range []struct {
		name string
		keep time.Duration
	}{{"delete", 0}, {"keep", time.Hour}} {
		t.Run(tc.name, func(t *testing.T) {
			eachDialect(t, func(t *testing.T, b backend) {
				s := newStore(t, b)
				q, db := s.open(t, sqlqueue.WithRetention(tc.keep, 0))
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
				if _, _, err := q.StartAck(ctx, []queue.Lease{pre[0].Lease(), pre[1].Lease()}, []queue.Lease{held[0].Lease(), held[1].Lease(), stale}); err != nil {
					t.Fatal(err)
				}
				if _, err := q.AckMany(ctx, []queue.Lease{held[2].Lease(), pre[0].Lease()}); err != nil {
					t.Fatal(err)
				}
				// Two leases naming each other's current tokens finish
				// nothing (the by-token statements roll back and the exact
				// ones run) and count nothing.
				swapped := []queue.Lease{{JobID: held[5].ID, Token: pre[1].LeaseToken}, {JobID: pre[1].ID, Token: held[5].LeaseToken}}
				if lost, err := q.AckMany(ctx, swapped); err != nil || len(lost) != 2 {
					t.Fatalf("AckMany of swapped tokens = %d lost, %v; want 2 lost", len(lost), err)
				}
				if lost, err := q.AckMany(ctx, []queue.Lease{held[5].Lease(), pre[1].Lease()}); err != nil || len(lost) != 0 {
					t.Fatalf("AckMany after swapped tokens = %d lost, %v; want none lost", len(lost), err)
				}
				// Statements the triggers count, on whichever connections.
				for range 3 {
					if err := q.Push(ctx, queue.Job{Queue: "c", Name: "n"}); err != nil {
						t.Fatal(err)
					}
				}
				if err := q.Ack(ctx, held[3].Lease()); err != nil {
					t.Fatal(err)
				}
				if err := q.Fail(ctx, held[4].Lease(), "boom"); err != nil {
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
				rows, err := db.QueryContext(ctx, "SELECT queue, state, COUNT(*) FROM "+s.table+" GROUP BY queue, state")
				if err != nil {
					t.Fatal(err)
				}
				defer rows.Close()
				want := map[string]int64{}
				for rows.Next() {
					var name, state string
					var n int64
					if err := rows.Scan(&name, &state, &n); err != nil {
						t.Fatal(err)
					}
					want[name+"/"+state] = n
				}
				if err := rows.Err(); err != nil {
					t.Fatal(err)
				}
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
