package sqlqueue_test

import (
	"testing"
	"time"

	"github.com/meridianjobs/meridian/internal/testutil"
	queue "github.com/meridianjobs/meridian/queue/driver"
	"github.com/meridianjobs/meridian/sqlqueue"
)

// TestAckManyAwkwardIDs checks that a batch ack and StartAck find jobs
// whose IDs hold the characters of SQL and array literals (PostgreSQL and
// SQLite pass the batch as two text arrays), both when acked jobs are
// deleted and when they are kept.
func TestAckManyAwkwardIDs(t *testing.T) {
	ids := []string{`a"b`, `c\d`, `e,f`, `{g}`, `NULL`, `h i`, `j'k`, `é`, `""`}
	for _, tc := range []struct {
		name string
		opts []sqlqueue.Option
	}{
		{"delete", nil},
		{"keep", []sqlqueue.Option{sqlqueue.WithRetention(time.Hour, time.Hour)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			eachDialect(t, func(t *testing.T, b backend) {
				q := newStore(t, b).queue(t, tc.opts...)
				ctx := t.Context()
				jobs := make([]queue.Job, len(ids))
				for i, id := range ids {
					jobs[i] = queue.Job{ID: id, Queue: "a", Name: "n"}
				}
				if _, err := q.PushMany(ctx, jobs); err != nil {
					t.Fatal(err)
				}
				got, err := q.Reserve(ctx, []string{"a"}, len(ids), time.Minute)
				if err != nil || len(got) != len(ids) {
					t.Fatalf("Reserve = %d jobs, %v; want %d", len(got), err, len(ids))
				}
				leases := make([]queue.Lease, len(got))
				for i, j := range got {
					leases[i] = j.Lease()
				}
				// StartAck counts the first four (one statement or
				// transaction with the acks of the others), AckMany acks them.
				lostS, lostA, err := testutil.StartAck(ctx, q, leases[:4], leases[4:])
				if err != nil || len(lostS)+len(lostA) != 0 {
					t.Fatalf("StartAck = lost %v and %v, %v; want none lost", lostS, lostA, err)
				}
				for _, l := range leases[:4] {
					if info, err := q.GetJob(ctx, l.JobID); err != nil || info.Attempts != 2 {
						t.Fatalf("GetJob(%q) after Reserve and StartAck = %d attempts, %v; want 2", l.JobID, info.Attempts, err)
					}
				}
				lost, err := testutil.AckMany(ctx, q, leases[:4])
				if err != nil || len(lost) != 0 {
					t.Fatalf("AckMany = lost %v, %v; want none lost", lost, err)
				}
				if n, err := q.Len(ctx, "a"); err != nil || n != 0 {
					t.Fatalf("Len = %d, %v; want 0", n, err)
				}
			})
		})
	}
}
