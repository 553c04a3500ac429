package redisqueue_test

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/meridianjobs/meridian/queue/driver"
)

// TestWorkersExpire checks the registry's expiry: an entry not seen for
// two minutes is not listed, and the next heartbeat deletes it.
func TestWorkersExpire(t *testing.T) {
	t.Parallel()
	rdb := client(t)
	p := prefix(t, rdb)
	q := newQueue(t, rdb, p)
	ctx := t.Context()
	for _, id := range []string{"live", "gone"} {
		if err := q.Heartbeat(ctx, driver.WorkerInfo{ID: id, Host: "h"}); err != nil {
			t.Fatal(err)
		}
	}
	// "gone" last beat three minutes ago.
	seen := "{" + p + "}:seen"
	if err := rdb.ZAdd(ctx, seen, redis.Z{Score: float64(time.Now().Add(-3 * time.Minute).UnixMilli()), Member: "gone"}).Err(); err != nil {
		t.Fatal(err)
	}
	ws, err := q.Workers(ctx)
	if err != nil || len(ws) != 1 || ws[0].ID != "live" {
		t.Fatalf("Workers() = %+v, %v; want only live", ws, err)
	}
	if err := q.Heartbeat(ctx, driver.WorkerInfo{ID: "live", Host: "h"}); err != nil {
		t.Fatal(err)
	}
	if n, err := rdb.HExists(ctx, "{"+p+"}:workers", "gone").Result(); err != nil || n {
		t.Errorf("after a heartbeat the expired entry is still kept (%v, %v)", n, err)
	}
	if n, err := rdb.ZCard(ctx, seen).Result(); err != nil || n != 1 {
		t.Errorf("the seen set holds %d entries, %v; want 1", n, err)
	}
}

// TestMetricsFromSeveralProcesses checks that the run metrics of two
// processes add up in the store, each written by its own heartbeat or
// Close, and that a third reads the sums.
func TestMetricsFromSeveralProcesses(t *testing.T) {
	t.Parallel()
	rdb := client(t)
	p := prefix(t, rdb)
	a, b, reader := newQueue(t, rdb, p), newQueue(t, client(t), p), newQueue(t, client(t), p)
	ctx := t.Context()
	start := time.Now()
	a.ObserveRun(driver.RunRecord{Queue: "m", Start: start, Runtime: 30 * time.Millisecond, Wait: time.Millisecond, Outcome: driver.OutcomeDone})
	a.ObserveRun(driver.RunRecord{Queue: "m", Start: start, Runtime: 10 * time.Millisecond, Outcome: driver.OutcomeFailed})
	b.ObserveRun(driver.RunRecord{Queue: "m", Start: start, Runtime: 50 * time.Millisecond, Wait: 2 * time.Millisecond, Outcome: driver.OutcomeDone})
	b.ObserveRun(driver.RunRecord{Queue: "other", Start: start, Runtime: time.Millisecond, Outcome: driver.OutcomeDone})
	if points, err := reader.Metrics(ctx, start.Add(-time.Minute)); err != nil || len(points) != 0 {
		t.Fatalf("Metrics before any write = %+v, %v; want none (ObserveRun only buffers)", points, err)
	}
	if err := a.Heartbeat(ctx, driver.WorkerInfo{ID: "a"}); err != nil { // writes a's buffer
		t.Fatal(err)
	}
	if err := b.Close(); err != nil { // writes b's buffer
		t.Fatal(err)
	}
	points, err := reader.Metrics(ctx, start.Add(-time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	var m driver.MetricPoint
	queues := map[string]bool{}
	for _, pt := range points {
		queues[pt.Queue] = true
		if pt.Queue != "m" {
			continue
		}
		m.Processed += pt.Processed
		m.Failed += pt.Failed
		m.TotalRuntime += pt.TotalRuntime
		m.TotalWait += pt.TotalWait
		m.MaxRuntime = max(m.MaxRuntime, pt.MaxRuntime)
	}
	if m.Processed != 2 || m.Failed != 1 || m.TotalRuntime != 90*time.Millisecond || m.MaxRuntime != 50*time.Millisecond || m.TotalWait != 3*time.Millisecond || !queues["other"] {
		t.Errorf("Metrics summed for m = %+v (queues %v); want 2 processed, 1 failed, 90ms total and 50ms max runtime, 3ms wait, and queue other", m, queues)
	}
}
