package promqueue

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/meridianjobs/meridian/internal/storestats"
	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// RuntimeBuckets are the default buckets of meridian_job_runtime_seconds:
// 5 ms to one hour.
var RuntimeBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600}

// WaitBuckets are the default buckets of meridian_job_wait_seconds: 10 ms
// to one day, for queues that keep up and queues that fall hours behind.
var WaitBuckets = []float64{.01, .05, .1, .5, 1, 5, 10, 30, 60, 300, 900, 3600, 4 * 3600, 24 * 3600}

// Option configures New.
type Option func(*config)

type config struct {
	in             driver.Inspector
	ttl            time.Duration
	timeout        time.Duration
	runtimeBuckets []float64
	waitBuckets    []float64
}

// WithInspector exports the store's per-queue state (depth by state, the
// oldest ready job's age, pauses) read through in, usually the Queue
// itself when its driver implements driver.Inspector.
func WithInspector(in driver.Inspector) Option { return func(c *config) { c.in = in } }

// WithCacheTTL sets how long a read of the store serves scrapes (default
// 10 s). Keep it below the scrape interval.
func WithCacheTTL(d time.Duration) Option { return func(c *config) { c.ttl = d } }

// WithReadTimeout bounds each read of the store (default 5 s).
func WithReadTimeout(d time.Duration) Option { return func(c *config) { c.timeout = d } }

// WithRuntimeBuckets replaces RuntimeBuckets.
func WithRuntimeBuckets(b []float64) Option { return func(c *config) { c.runtimeBuckets = b } }

// WithWaitBuckets replaces WaitBuckets.
func WithWaitBuckets(b []float64) Option { return func(c *config) { c.waitBuckets = b } }

// Metrics holds the collectors. It is a queue.Observer (the outcome
// counters) and provides a queue.Middleware (in-flight, runtime and wait);
// a Worker needs both, which Instrument sets. Safe for concurrent use; one
// Metrics may serve several Workers.
type Metrics struct {
	processed, failed, retried, dead, leaseLost *prometheus.CounterVec
	cancelled, snoozed                          *prometheus.CounterVec
	runtime, wait                               *prometheus.HistogramVec
	inFlight                                    *prometheus.GaugeVec
}

var jobLabels = []string{"queue", "job"}

// New creates the collectors and registers them on reg. It fails if reg
// already holds collectors of the same names.
func New(reg prometheus.Registerer, opts ...Option) (*Metrics, error) {
	c := config{ttl: 10 * time.Second, timeout: 5 * time.Second, runtimeBuckets: RuntimeBuckets, waitBuckets: WaitBuckets}
	for _, o := range opts {
		o(&c)
	}
	counter := func(name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, jobLabels)
	}
	m := &Metrics{
		processed: counter("meridian_jobs_processed_total", "Job attempts that succeeded."),
		failed:    counter("meridian_jobs_failed_total", "Job attempts that failed (retried or dead-lettered)."),
		retried:   counter("meridian_jobs_retried_total", "Failed job attempts released for a retry."),
		dead:      counter("meridian_jobs_dead_lettered_total", "Jobs moved to the dead letters."),
		leaseLost: counter("meridian_jobs_lease_lost_total", "Job attempts whose lease was lost; their result was discarded."),
		cancelled: counter("meridian_jobs_cancelled_total", "Jobs cancelled while this process held them, or by their handler."),
		snoozed:   counter("meridian_jobs_snoozed_total", "Job attempts the handler snoozed (given back, not counted)."),
		runtime: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "meridian_job_runtime_seconds", Help: "Handler run time of job attempts.", Buckets: c.runtimeBuckets,
		}, jobLabels),
		wait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "meridian_job_wait_seconds", Help: "Time from a job becoming available to its attempt starting.", Buckets: c.waitBuckets,
		}, jobLabels),
		inFlight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "meridian_jobs_in_flight", Help: "Job handlers running now in this process.",
		}, []string{"queue"}),
	}
	cs := []prometheus.Collector{m.processed, m.failed, m.retried, m.dead, m.leaseLost, m.cancelled, m.snoozed, m.runtime, m.wait, m.inFlight}
	if c.in != nil {
		cs = append(cs, newStoreCollector(storestats.NewCache(c.in, c.ttl, c.timeout)))
	}
	for i, col := range cs {
		if err := reg.Register(col); err != nil {
			for _, done := range cs[:i] {
				reg.Unregister(done)
			}
			return nil, fmt.Errorf("promqueue: registering collectors: %w", err)
		}
	}
	return m, nil
}

// Instrument sets m as w's Observer and adds m's Middleware, and returns w.
func (m *Metrics) Instrument(w *queue.Worker) *queue.Worker {
	return w.Observer(m).Use(m.Middleware())
}

// Observe counts the recorded outcome of an attempt (queue.Observer).
func (m *Metrics) Observe(e queue.Event) {
	lv := []string{e.Job.QueueName(), e.Job.Name}
	switch e.Kind {
	case queue.EventDone:
		m.processed.WithLabelValues(lv...).Inc()
	case queue.EventRetried:
		m.failed.WithLabelValues(lv...).Inc()
		m.retried.WithLabelValues(lv...).Inc()
	case queue.EventFailed:
		m.failed.WithLabelValues(lv...).Inc()
		m.dead.WithLabelValues(lv...).Inc()
	case queue.EventLeaseLost:
		m.leaseLost.WithLabelValues(lv...).Inc()
	case queue.EventCancelled:
		m.cancelled.WithLabelValues(lv...).Inc()
	case queue.EventSnoozed:
		m.snoozed.WithLabelValues(lv...).Inc()
	}
}

// Middleware measures each attempt's wait and runtime and counts it in
// flight while the handler runs (panics included).
func (m *Metrics) Middleware() queue.Middleware {
	return func(next queue.Handler) queue.Handler {
		return func(ctx context.Context, j queue.Job) error {
			start := time.Now()
			q := j.QueueName()
			if ws := j.WaitStart(); !ws.IsZero() {
				m.wait.WithLabelValues(q, j.Name).Observe(max(start.Sub(ws), 0).Seconds())
			}
			g := m.inFlight.WithLabelValues(q)
			g.Inc()
			defer func() {
				g.Dec()
				m.runtime.WithLabelValues(q, j.Name).Observe(time.Since(start).Seconds())
			}()
			return next(ctx, j)
		}
	}
}

var _ queue.Observer = (*Metrics)(nil)

// storeCollector exports the store's per-queue state at scrape time.
type storeCollector struct {
	cache                *storestats.Cache
	jobs, oldest, paused *prometheus.Desc
	errors               prometheus.Counter
}

func newStoreCollector(c *storestats.Cache) *storeCollector {
	return &storeCollector{
		cache:  c,
		jobs:   prometheus.NewDesc("meridian_queue_jobs", "Jobs in the store by queue and state (ready, scheduled, running, dead; done and cancelled where the store counts them).", []string{"queue", "state"}, nil),
		oldest: prometheus.NewDesc("meridian_queue_oldest_ready_age_seconds", "How long the queue's oldest ready job has waited; 0 when none is ready.", []string{"queue"}, nil),
		paused: prometheus.NewDesc("meridian_queue_paused", "1 when the queue is paused.", []string{"queue"}, nil),
		errors: prometheus.NewCounter(prometheus.CounterOpts{Name: "meridian_queue_stats_errors_total", Help: "Failed reads of the store's queue state."}),
	}
}

func (s *storeCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- s.jobs
	ch <- s.oldest
	ch <- s.paused
	s.errors.Describe(ch)
}

func (s *storeCollector) Collect(ch chan<- prometheus.Metric) {
	snap, err := s.cache.Get(context.Background())
	if err != nil && !errors.Is(err, context.Canceled) {
		s.errors.Inc()
	}
	s.errors.Collect(ch)
	if err != nil {
		return
	}
	ages := map[string]bool{}
	for _, d := range snap.Depths() {
		ch <- prometheus.MustNewConstMetric(s.jobs, prometheus.GaugeValue, float64(d.N), d.Queue, string(d.State))
		if !ages[d.Queue] {
			ages[d.Queue] = true
			ch <- prometheus.MustNewConstMetric(s.oldest, prometheus.GaugeValue, snap.OldestAge(d.Queue).Seconds(), d.Queue)
		}
	}
	for _, st := range snap.Stats {
		if !ages[st.Queue] {
			ages[st.Queue] = true
			ch <- prometheus.MustNewConstMetric(s.oldest, prometheus.GaugeValue, snap.OldestAge(st.Queue).Seconds(), st.Queue)
		}
		paused := 0.0
		if st.Paused {
			paused = 1
		}
		ch <- prometheus.MustNewConstMetric(s.paused, prometheus.GaugeValue, paused, st.Queue)
	}
}
