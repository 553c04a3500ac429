package sqlqueue_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meridianjobs/meridian/internal/testutil"
	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
	"github.com/meridianjobs/meridian/sqlqueue"
)

// metricsProbe and metricsOther are the job classes of
// TestRunMetricsOneWritePerInterval.
type (
	metricsProbe struct{ N int }
	metricsOther struct{ N int }
)

// TestRunMetricsOneWritePerInterval runs jobs of two classes through a
// Worker and checks the rules of the run metrics on every dialect: the
// process writes them at most once a second (its heartbeats), never once
// per job, and another process reading the same tables sees every run,
// by queue and job name, per minute and per hour.
func TestRunMetricsOneWritePerInterval(t *testing.T) {
	t.Parallel()
	const jobs = 60
	for d, mk := range backends(t) {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			s := newStore(t, mk(t))
			q := s.queue(t)
			for i := range jobs {
				var j queue.Job
				var err error
				if i%3 == 0 {
					j, err = queue.NewJob(metricsOther{i})
				} else {
					j, err = queue.NewJob(metricsProbe{i})
				}
				if err != nil {
					t.Fatal(err)
				}
				if err := q.Push(t.Context(), j); err != nil {
					t.Fatal(err)
				}
			}
			w := queue.NewWorker(q).Poll(20 * time.Millisecond).Concurrency(4)
			var handled atomic.Int64
			queue.Handle(w, func(context.Context, metricsProbe) error { handled.Add(1); return nil })
			queue.Handle(w, func(context.Context, metricsOther) error { handled.Add(1); return nil })
			ctx, stop := context.WithCancel(t.Context())
			ran := make(chan error, 1)
			started := time.Now()
			go func() { ran <- w.Run(ctx) }()
			if !testutil.WaitFor(60*time.Second, func() bool { return handled.Load() == jobs }) {
				t.Fatalf("%d of %d jobs handled", handled.Load(), jobs)
			}
			stop()
			if err := <-ran; err != nil {
				t.Fatalf("Run: %v", err)
			}
			elapsed := time.Since(started)
			// One write per second at most, plus the last one at the end.
			if n, most := sqlqueue.MetricsFlushes(q), int(elapsed/time.Second)+2; n > most || n < 1 {
				t.Errorf("%d jobs in %v made %d metrics writes, want 1 to %d", jobs, elapsed.Round(time.Millisecond), n, most)
			}

			other := s.queue(t) // another process's view
			since := started.Add(-time.Minute)
			minutes, err := other.Metrics(t.Context(), since)
			if err != nil {
				t.Fatalf("Metrics: %v", err)
			}
			hours, err := other.HourlyMetrics(t.Context(), since)
			if err != nil {
				t.Fatalf("HourlyMetrics: %v", err)
			}
			for what, points := range map[string][]driver.MetricPoint{"Metrics": minutes, "HourlyMetrics": hours} {
				byName := map[string]int64{}
				for _, p := range points {
					if p.Runtimes.Count() != p.Processed+p.Failed {
						t.Errorf("%s: point %+v counts %d runtimes, want %d", what, p, p.Runtimes.Count(), p.Processed+p.Failed)
					}
					byName[p.Name] += p.Processed
				}
				probe, otherName := queue.NameOf[metricsProbe](), queue.NameOf[metricsOther]()
				if byName[probe] != jobs*2/3 || byName[otherName] != jobs/3 {
					t.Errorf("%s by job name = %v, want %d of %s and %d of %s", what, byName, jobs*2/3, probe, jobs/3, otherName)
				}
			}
		})
	}
}

// TestRunMetricsRetention checks that Maintain keeps per-minute points a
// day and hourly points seven days (driver.MetricsRetention).
func TestRunMetricsRetention(t *testing.T) {
	t.Parallel()
	for d, mk := range backends(t) {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			s := newStore(t, mk(t))
			q := s.queue(t)
			now := time.Now()
			for _, age := range []time.Duration{time.Hour, 2 * 24 * time.Hour, 8 * 24 * time.Hour} {
				q.ObserveRun(driver.RunRecord{Queue: "ret", Name: "aged", Start: now.Add(-age), Runtime: time.Millisecond, Outcome: driver.OutcomeDone})
			}
			if err := q.FlushMetrics(t.Context()); err != nil {
				t.Fatalf("FlushMetrics: %v", err)
			}
			count := func(read func(context.Context, time.Time) ([]driver.MetricPoint, error)) int {
				t.Helper()
				points, err := read(t.Context(), now.Add(-9*24*time.Hour))
				if err != nil {
					t.Fatal(err)
				}
				return len(points)
			}
			if m, h := count(q.Metrics), count(q.HourlyMetrics); m != 3 || h != 3 {
				t.Fatalf("before Maintain: %d minutes and %d hours, want 3 and 3", m, h)
			}
			if _, _, err := q.Maintain(t.Context()); err != nil {
				t.Fatalf("Maintain: %v", err)
			}
			if m, h := count(q.Metrics), count(q.HourlyMetrics); m != 1 || h != 2 {
				t.Errorf("after Maintain: %d minutes and %d hours, want 1 (the last hour's) and 2 (all but the 8-day-old)", m, h)
			}
		})
	}
}
