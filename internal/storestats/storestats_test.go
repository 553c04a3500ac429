package storestats_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/meridianjobs/meridian/internal/storestats"
	"github.com/meridianjobs/meridian/memqueue"
	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// counting counts QueueStats calls.
type counting struct {
	driver.Inspector
	calls int
	err   error
}

func (c *counting) QueueStats(ctx context.Context) ([]driver.QueueStats, error) {
	c.calls++
	if c.err != nil {
		return nil, c.err
	}
	return c.Inspector.QueueStats(ctx)
}

func TestCacheReadsOncePerTTL(t *testing.T) {
	t.Parallel()
	q := memqueue.New()
	old := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	if err := q.Push(context.Background(), queue.Job{Queue: "a", Name: "x", AvailableAt: old}); err != nil {
		t.Fatal(err)
	}
	in := &counting{Inspector: q}
	c := storestats.NewCache(in, time.Hour, time.Second)
	for range 3 {
		s, err := c.Get(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if !s.OldestReady["a"].Equal(old) || s.OldestAge("a") < time.Hour || s.OldestAge("b") != 0 {
			t.Fatalf("snapshot %+v: want a's oldest ready job at %v", s.OldestReady, old)
		}
	}
	if in.calls != 1 {
		t.Fatalf("%d reads for three gets within the TTL, want 1", in.calls)
	}

	failing := &counting{Inspector: q, err: errors.New("down")}
	c = storestats.NewCache(failing, time.Hour, time.Second)
	for range 2 {
		if _, err := c.Get(context.Background()); err == nil {
			t.Fatal("a failed read was not reported")
		}
	}
	if failing.calls != 1 {
		t.Fatalf("%d reads of a failing store within the TTL, want 1", failing.calls)
	}
}
