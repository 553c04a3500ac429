package memqueue_test

import (
	"context"
	"testing"
	"time"

	"github.com/meridianjobs/meridian/memqueue"
	"github.com/meridianjobs/meridian/queue"
)

func TestOldestReady(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	clock := now
	q := memqueue.New(memqueue.WithClock(func() time.Time { return clock }))
	ctx := context.Background()
	push := func(queueName string, at time.Time, prio int) {
		t.Helper()
		if err := q.Push(ctx, queue.Job{Queue: queueName, Name: "x", AvailableAt: at, Priority: prio}); err != nil {
			t.Fatal(err)
		}
	}
	push("a", now.Add(-time.Minute), 0)
	push("a", now.Add(-time.Hour), 5) // another lane, older
	push("a", now.Add(-2*time.Hour), 0)
	push("b", now.Add(time.Hour), 0) // scheduled: not ready
	got, err := q.OldestReady(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || !got["a"].Equal(now.Add(-2*time.Hour)) {
		t.Fatalf("OldestReady = %v, want only a at two hours ago", got)
	}
	clock = now.Add(2 * time.Hour) // b's job comes due
	got, err = q.OldestReady(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !got["b"].Equal(now.Add(time.Hour)) {
		t.Fatalf("OldestReady = %v, want b at its AvailableAt once due", got)
	}
	var _ queue.OldestReadyReader = q
}
