package promqueue_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/meridianjobs/meridian/internal/observetest"
	"github.com/meridianjobs/meridian/memqueue"
	"github.com/meridianjobs/meridian/observe/promqueue"
	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// inspectingQueue is a Queue with the inspection side.
type inspectingQueue interface {
	queue.Queue
	driver.Inspector
}

func TestScrapeAfterWorkload(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		open func(t *testing.T) inspectingQueue
		done int // acked jobs the store keeps: memqueue keeps 1,000, this sqlqueue none
	}{
		{"memory", func(t *testing.T) inspectingQueue { return memqueue.New() }, observetest.WantProcessed},
		{"postgres", func(t *testing.T) inspectingQueue {
			return observetest.Postgres(t, observetest.RandomTable(), true)
		}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			q := tc.open(t)
			reg := prometheus.NewRegistry()
			m, err := promqueue.New(reg, promqueue.WithInspector(q), promqueue.WithCacheTTL(time.Nanosecond))
			if err != nil {
				t.Fatal(err)
			}
			settled := observetest.NewSettled()
			w := queue.NewWorker(q).Queues("prom").MaxRetry(3).Backoff(0).Poll(20 * time.Millisecond).Concurrency(2).Slog(observetest.Quiet())
			w.Observer(queue.Observers(m, settled)).Use(m.Middleware())
			queue.Handle(w, observetest.HandleTask)
			ctx := context.Background()
			if err := observetest.Dispatch(ctx, q, "prom"); err != nil {
				t.Fatal(err)
			}
			// One job is left waiting on a queue no worker serves, for the
			// depth and age gauges.
			if err := queue.Dispatch(ctx, q, observetest.Task{N: 7}, queue.OnQueue("idle")); err != nil {
				t.Fatal(err)
			}
			stop := observetest.RunWorker(w)
			if err := settled.Wait(60 * time.Second); err != nil {
				_ = stop()
				t.Fatal(err)
			}
			if err := stop(); err != nil {
				t.Fatalf("Run: %v", err)
			}

			srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
			defer srv.Close()
			want := fmt.Sprintf(`
# HELP meridian_jobs_processed_total Job attempts that succeeded.
# TYPE meridian_jobs_processed_total counter
meridian_jobs_processed_total{job="task",queue="prom"} %d
# HELP meridian_jobs_failed_total Job attempts that failed (retried or dead-lettered).
# TYPE meridian_jobs_failed_total counter
meridian_jobs_failed_total{job="task",queue="prom"} %d
# HELP meridian_jobs_retried_total Failed job attempts released for a retry.
# TYPE meridian_jobs_retried_total counter
meridian_jobs_retried_total{job="task",queue="prom"} %d
# HELP meridian_jobs_dead_lettered_total Jobs moved to the dead letters.
# TYPE meridian_jobs_dead_lettered_total counter
meridian_jobs_dead_lettered_total{job="task",queue="prom"} %d
# HELP meridian_jobs_in_flight Job handlers running now in this process.
# TYPE meridian_jobs_in_flight gauge
meridian_jobs_in_flight{queue="prom"} 0
# HELP meridian_queue_jobs Jobs in the store by queue and state (ready, scheduled, running, dead; done and cancelled where the store counts them).
# TYPE meridian_queue_jobs gauge
meridian_queue_jobs{queue="idle",state="cancelled"} 0
meridian_queue_jobs{queue="idle",state="dead"} 0
meridian_queue_jobs{queue="idle",state="done"} 0
meridian_queue_jobs{queue="idle",state="ready"} 1
meridian_queue_jobs{queue="idle",state="running"} 0
meridian_queue_jobs{queue="idle",state="scheduled"} 0
meridian_queue_jobs{queue="prom",state="cancelled"} 0
meridian_queue_jobs{queue="prom",state="dead"} 1
meridian_queue_jobs{queue="prom",state="done"} %d
meridian_queue_jobs{queue="prom",state="ready"} 0
meridian_queue_jobs{queue="prom",state="running"} 0
meridian_queue_jobs{queue="prom",state="scheduled"} 0
`, observetest.WantProcessed, observetest.WantFailed, observetest.WantRetried, observetest.WantDead, tc.done)
			names := []string{"meridian_jobs_processed_total", "meridian_jobs_failed_total", "meridian_jobs_retried_total",
				"meridian_jobs_dead_lettered_total", "meridian_jobs_in_flight", "meridian_queue_jobs"}
			if err := testutil.ScrapeAndCompare(srv.URL, strings.NewReader(want), names...); err != nil {
				t.Error(err)
			}

			body := scrape(t, srv.URL)
			for _, line := range []string{
				fmt.Sprintf(`meridian_job_runtime_seconds_count{job="task",queue="prom"} %d`, observetest.WantAttempts),
				fmt.Sprintf(`meridian_job_wait_seconds_count{job="task",queue="prom"} %d`, observetest.WantAttempts),
				`meridian_queue_oldest_ready_age_seconds{queue="prom"} 0`,
				`meridian_queue_stats_errors_total 0`,
			} {
				if !strings.Contains(body, line+"\n") {
					t.Errorf("the scrape lacks %q:\n%s", line, body)
				}
			}
			if !strings.Contains(body, `meridian_queue_oldest_ready_age_seconds{queue="idle"} `) ||
				strings.Contains(body, `meridian_queue_oldest_ready_age_seconds{queue="idle"} 0`+"\n") {
				t.Errorf("the idle queue's oldest ready job has no age:\n%s", body)
			}
		})
	}
}

func scrape(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestNewRejectsASecondRegistration(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	if _, err := promqueue.New(reg); err != nil {
		t.Fatal(err)
	}
	if _, err := promqueue.New(reg); err == nil {
		t.Fatal("registering the collectors twice on one registry succeeded")
	}
}

func TestCancelledAndSnoozedCounters(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	m, err := promqueue.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	j := queue.Job{Queue: "mail", Name: "Send"}
	for _, k := range []queue.EventKind{queue.EventCancelled, queue.EventSnoozed, queue.EventSnoozed, queue.EventStarted} {
		m.Observe(queue.Event{Kind: k, Job: j})
	}
	want := `
# HELP meridian_jobs_cancelled_total Jobs cancelled while this process held them, or by their handler.
# TYPE meridian_jobs_cancelled_total counter
meridian_jobs_cancelled_total{job="Send",queue="mail"} 1
# HELP meridian_jobs_snoozed_total Job attempts the handler snoozed (given back, not counted).
# TYPE meridian_jobs_snoozed_total counter
meridian_jobs_snoozed_total{job="Send",queue="mail"} 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "meridian_jobs_cancelled_total", "meridian_jobs_snoozed_total"); err != nil {
		t.Error(err)
	}
}
