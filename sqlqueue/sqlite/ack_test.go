package sqlite_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/meridianjobs/meridian/internal/testutil"
	queue "github.com/meridianjobs/meridian/queue/driver"
	"github.com/meridianjobs/meridian/sqlqueue/sqlite"
)

// TestAckManyPairs checks the batch ack's pairing of IDs and tokens (they
// travel as two arrays): IDs with control characters and JSON escapes are
// acked, and leases whose IDs and tokens are swapped ack nothing.
func TestAckManyPairs(t *testing.T) {
	q, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "jobs.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	ctx := t.Context()
	ids := []string{"tab\there", "nl\nx", "ctl\x01y", `q"\u0041`, `back\\slash`, "é中"}
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
	// Swapped tokens: every lease is wrong, nothing may be acked.
	swapped := make([]queue.Lease, len(got))
	for i, j := range got {
		swapped[i] = queue.Lease{JobID: j.ID, Token: got[(i+1)%len(got)].LeaseToken}
	}
	lost, err := testutil.AckMany(ctx, q, swapped)
	if err != nil || len(lost) != len(swapped) {
		t.Fatalf("AckMany(swapped) = %d lost, %v; want all %d lost", len(lost), err, len(swapped))
	}
	if n, err := q.Len(ctx, "a"); err != nil || n != len(ids) {
		t.Fatalf("after swapped leases Len = %d, %v; want %d", n, err, len(ids))
	}
	leases := make([]queue.Lease, len(got))
	for i, j := range got {
		leases[i] = j.Lease()
	}
	lost, err = testutil.AckMany(ctx, q, leases)
	if err != nil || len(lost) != 0 {
		t.Fatalf("AckMany = lost %v, %v; want none lost", lost, err)
	}
	if n, err := q.Len(ctx, "a"); err != nil || n != 0 {
		t.Fatalf("Len = %d, %v; want 0", n, err)
	}
}
