package sqlqueue_test

import (
	"slices"
	"testing"

	queue "github.com/meridianjobs/meridian/queue/driver"
	"github.com/meridianjobs/meridian/sqlqueue"
)

// TestWithReads: the inspection reads go to the WithReads handle and the
// writes to the queue's own. The read handle here is another store's
// database (same table name, other jobs), so every read shows which
// handle answered it.
func TestWithReads(t *testing.T) {
	ctx := t.Context()
	writes, reads := newStore(t, sqliteBackend()), newStore(t, sqliteBackend())
	reads.table = writes.table
	other, otherDB := reads.open(t)
	seen := queue.Job{ID: "seen", Queue: "r", Name: "n"}
	if err := other.Push(ctx, seen); err != nil {
		t.Fatal(err)
	}
	q := writes.queue(t, sqlqueue.WithReads(otherDB))
	if err := q.Push(ctx, queue.Job{ID: "written", Queue: "w", Name: "n"}); err != nil {
		t.Fatal(err)
	}
	page, err := q.ListJobs(ctx, queue.JobFilter{State: queue.StateReady})
	if err != nil || len(page.Jobs) != 1 || page.Jobs[0].ID != "seen" {
		t.Fatalf("ListJobs = %+v, %v; want the read handle's job", page.Jobs, err)
	}
	if _, err := q.GetJob(ctx, "seen"); err != nil {
		t.Errorf("GetJob(seen) through the read handle: %v", err)
	}
	stats, err := q.QueueStats(ctx)
	if err != nil || !slices.ContainsFunc(stats, func(s queue.QueueStats) bool { return s.Queue == "r" && s.Ready.N == 1 }) {
		t.Errorf("QueueStats = %+v, %v; want queue r with one ready job", stats, err)
	}
	// The write went to the queue's own database.
	if n, err := q.Len(ctx, "w"); err != nil || n != 1 {
		t.Errorf("Len(w) = %d, %v; want 1", n, err)
	}
	if n, err := other.Len(ctx, "w"); err != nil || n != 0 {
		t.Errorf("the read handle's Len(w) = %d, %v; want 0", n, err)
	}
}
