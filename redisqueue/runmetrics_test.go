package redisqueue_test

import (
	"testing"
	"time"

	"github.com/meridianjobs/meridian/queue/driver"
	"github.com/meridianjobs/meridian/redisqueue"
)

// TestRunMetricsOneWritePerInterval checks that however many runs a
// process observes and however often it beats, it writes its metrics at
// most once a second, and that another process then reads every run by
// job name, per minute and per hour, with its runtime buckets.
func TestRunMetricsOneWritePerInterval(t *testing.T) {
	t.Parallel()
	rdb := client(t)
	p := prefix(t, rdb)
	q, reader := newQueue(t, rdb, p), newQueue(t, client(t), p)
	ctx := t.Context()
	started := time.Now()
	const runs = 1000
	for i := range runs {
		name := "even"
		if i%2 == 1 {
			name = "odd"
		}
		q.ObserveRun(driver.RunRecord{Queue: "w", Name: name, Start: time.Now(), Runtime: time.Duration(i) * time.Millisecond, Outcome: driver.OutcomeDone})
		if i%50 == 0 {
			if err := q.Heartbeat(ctx, driver.WorkerInfo{ID: "w"}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := q.Close(); err != nil { // writes the rest
		t.Fatal(err)
	}
	elapsed := time.Since(started)
	if n, most := redisqueue.MetricsFlushes(q), int(elapsed/time.Second)+2; n < 1 || n > most {
		t.Errorf("%d runs and %d heartbeats in %v made %d metrics writes, want 1 to %d", runs, runs/50, elapsed.Round(time.Millisecond), n, most)
	}
	minutes, err := reader.Metrics(ctx, started.Add(-time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	hours, err := reader.HourlyMetrics(ctx, started.Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	for what, points := range map[string][]driver.MetricPoint{"Metrics": minutes, "HourlyMetrics": hours} {
		byName := map[string]*driver.MetricPoint{}
		for _, pt := range points {
			if byName[pt.Name] == nil {
				byName[pt.Name] = &driver.MetricPoint{}
			}
			byName[pt.Name].Add(pt)
		}
		for _, name := range []string{"even", "odd"} {
			got := byName[name]
			if got == nil || got.Processed != runs/2 || got.Runtimes.Count() != runs/2 {
				t.Errorf("%s: job name %s = %+v, want %d runs counted in its buckets", what, name, got, runs/2)
				continue
			}
			// Runtimes 0..999 ms: the odd ones' p50 is about 500ms, within
			// the buckets' factor of √2.
			if p50 := got.Runtimes.Quantile(0.5, got.MaxRuntime); p50 < 350*time.Millisecond || p50 > 710*time.Millisecond {
				t.Errorf("%s: p50 of %s = %v, want about 500ms", what, name, p50)
			}
		}
	}
}

// TestRunMetricsRetention checks the bounds on the metrics hashes: a
// minute's hash expires a day after its hour ends, an hourly one seven
// days after its day ends.
func TestRunMetricsRetention(t *testing.T) {
	t.Parallel()
	rdb := client(t)
	p := prefix(t, rdb)
	q := newQueue(t, rdb, p)
	ctx := t.Context()
	now := time.Now()
	q.ObserveRun(driver.RunRecord{Queue: "r", Name: "kept", Start: now, Runtime: time.Millisecond, Outcome: driver.OutcomeDone})
	if err := q.FlushMetrics(ctx); err != nil {
		t.Fatal(err)
	}
	minute, hourly := redisqueue.MetricsKeys(q, "r", now)
	for _, c := range []struct {
		key         string
		least, most time.Duration
	}{
		{minute, 24 * time.Hour, 25 * time.Hour},
		{hourly, driver.MetricsRetention, driver.MetricsRetention + 24*time.Hour},
	} {
		ttl, err := rdb.PTTL(ctx, c.key).Result()
		if err != nil {
			t.Fatal(err)
		}
		if ttl < c.least-time.Minute || ttl > c.most {
			t.Errorf("%s expires in %v, want %v to %v", c.key, ttl, c.least, c.most)
		}
	}
}
