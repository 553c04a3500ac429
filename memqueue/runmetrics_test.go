package memqueue_test

import (
	"sync"
	"testing"
	"time"

	"github.com/meridianjobs/meridian/memqueue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// TestRunMetricsRetention checks memqueue's bounds on its run metrics,
// on a clock the test moves: per-minute points for the last hour, hourly
// ones for driver.MetricsRetention, by job name.
func TestRunMetricsRetention(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	now := time.Date(2026, 11, 20, 10, 30, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	q := memqueue.New(memqueue.WithClock(clock))
	start := clock()
	q.ObserveRun(driver.RunRecord{Queue: "r", Name: "a", Start: start, Runtime: time.Millisecond, Outcome: driver.OutcomeDone})
	q.ObserveRun(driver.RunRecord{Queue: "r", Name: "b", Start: start, Runtime: time.Second, Outcome: driver.OutcomeFailed})
	count := func() (minutes, hours int) {
		t.Helper()
		m, err := q.Metrics(t.Context(), start.Add(-time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		h, err := q.HourlyMetrics(t.Context(), start.Add(-time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		return len(m), len(h)
	}
	for _, c := range []struct {
		after          time.Duration
		minutes, hours int
	}{
		{0, 2, 2},
		{59 * time.Minute, 2, 2},
		{time.Hour, 0, 2},
		{driver.MetricsRetention - time.Hour, 0, 2},
		{driver.MetricsRetention, 0, 0},
	} {
		advance(c.after - clock().Sub(start))
		if m, h := count(); m != c.minutes || h != c.hours {
			t.Errorf("%v later: %d per-minute and %d hourly points, want %d and %d", c.after, m, h, c.minutes, c.hours)
		}
	}
	// A run older than the retention is not counted.
	q.ObserveRun(driver.RunRecord{Queue: "r", Name: "a", Start: start, Runtime: time.Millisecond, Outcome: driver.OutcomeDone})
	if m, h := count(); m != 0 || h != 0 {
		t.Errorf("a run older than the retention made %d per-minute and %d hourly points, want none", m, h)
	}
}

// TestRunMetricsNamesBounded checks that one queue's minute keeps at
// most 1,000 job names apart; the runs of further names are counted
// under "(other)", none lost.
func TestRunMetricsNamesBounded(t *testing.T) {
	t.Parallel()
	q := memqueue.New()
	for i := range 1500 {
		q.ObserveRun(driver.RunRecord{Queue: "n", Name: "job" + string(rune('a'+i%26)) + time.Duration(i).String(), Runtime: time.Millisecond, Outcome: driver.OutcomeDone})
	}
	points, err := q.Metrics(t.Context(), time.Now().Add(-time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	var total, other int64
	for _, p := range points {
		total += p.Processed
		if p.Name == "(other)" {
			other = p.Processed
		}
	}
	if len(points) != 1001 || total != 1500 || other != 500 {
		t.Errorf("1,500 runs of 1,500 names: %d points, %d runs, %d under (other); want 1,001 points, 1,500 runs, 500 under (other)", len(points), total, other)
	}
}
