package otelqueue

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/meridianjobs/meridian/internal/storestats"
	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// MetricsOption configures NewMetrics.
type MetricsOption func(*metricsConfig)

type metricsConfig struct {
	in      driver.Inspector
	ttl     time.Duration
	timeout time.Duration
}

// WithInspector records the store's per-queue state (jobs by state, the
// oldest ready job's age) read through in, cached for ttl (10 s when
// zero) so that frequent collections cost one bounded read per ttl.
func WithInspector(in driver.Inspector, ttl time.Duration) MetricsOption {
	return func(c *metricsConfig) {
		c.in = in
		if ttl > 0 {
			c.ttl = ttl
		}
	}
}

// Metrics records job metrics on OpenTelemetry instruments. Like
// promqueue.Metrics it is a queue.Observer (outcome counters) and provides
// a Middleware (in flight, runtime, wait); Instrument sets both.
type Metrics struct {
	processed, failed, retried, dead, leaseLost metric.Int64Counter
	cancelled, snoozed                          metric.Int64Counter
	runtime, wait                               metric.Float64Histogram
	inFlight                                    metric.Int64UpDownCounter
}

// Attribute keys of the metrics.
const (
	AttrQueue = attribute.Key("queue")
	AttrJob   = attribute.Key("job")
	AttrState = attribute.Key("state")
)

// NewMetrics creates the instruments on mp's meter.
func NewMetrics(mp metric.MeterProvider, opts ...MetricsOption) (*Metrics, error) {
	c := metricsConfig{ttl: 10 * time.Second, timeout: 5 * time.Second}
	for _, o := range opts {
		o(&c)
	}
	meter := mp.Meter(ScopeName)
	var errs []error
	counter := func(name, desc string) metric.Int64Counter {
		ctr, err := meter.Int64Counter(name, metric.WithDescription(desc), metric.WithUnit("{attempt}"))
		errs = append(errs, err)
		return ctr
	}
	m := &Metrics{
		processed: counter("meridian.jobs.processed", "Job attempts that succeeded."),
		failed:    counter("meridian.jobs.failed", "Job attempts that failed (retried or dead-lettered)."),
		retried:   counter("meridian.jobs.retried", "Failed job attempts released for a retry."),
		dead:      counter("meridian.jobs.dead_lettered", "Jobs moved to the dead letters."),
		leaseLost: counter("meridian.jobs.lease_lost", "Job attempts whose lease was lost; their result was discarded."),
		cancelled: counter("meridian.jobs.cancelled", "Jobs cancelled while this process held them, or by their handler."),
		snoozed:   counter("meridian.jobs.snoozed", "Job attempts the handler snoozed (given back, not counted)."),
	}
	var err error
	m.runtime, err = meter.Float64Histogram("meridian.job.runtime", metric.WithUnit("s"),
		metric.WithDescription("Handler run time of job attempts."),
		metric.WithExplicitBucketBoundaries(.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600))
	errs = append(errs, err)
	m.wait, err = meter.Float64Histogram("meridian.job.wait", metric.WithUnit("s"),
		metric.WithDescription("Time from a job becoming available to its attempt starting."),
		metric.WithExplicitBucketBoundaries(.01, .05, .1, .5, 1, 5, 10, 30, 60, 300, 900, 3600, 4*3600, 24*3600))
	errs = append(errs, err)
	m.inFlight, err = meter.Int64UpDownCounter("meridian.jobs.in_flight", metric.WithUnit("{attempt}"),
		metric.WithDescription("Job handlers running now in this process."))
	errs = append(errs, err)
	if c.in != nil {
		errs = append(errs, registerStore(meter, storestats.NewCache(c.in, c.ttl, c.timeout)))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("otelqueue: creating instruments: %w", err)
	}
	return m, nil
}

func registerStore(meter metric.Meter, cache *storestats.Cache) error {
	jobs, err1 := meter.Int64ObservableGauge("meridian.queue.jobs", metric.WithUnit("{job}"),
		metric.WithDescription("Jobs in the store by queue and state (ready, scheduled, running, dead; done and cancelled where the store counts them)."))
	age, err2 := meter.Float64ObservableGauge("meridian.queue.oldest_ready.age", metric.WithUnit("s"),
		metric.WithDescription("How long the queue's oldest ready job has waited; 0 when none is ready."))
	if err := errors.Join(err1, err2); err != nil {
		return err
	}
	_, err := meter.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		snap, err := cache.Get(ctx)
		if err != nil {
			return err
		}
		seen := map[string]bool{}
		for _, d := range snap.Depths() {
			q := AttrQueue.String(d.Queue)
			o.ObserveInt64(jobs, d.N, metric.WithAttributes(q, AttrState.String(string(d.State))))
			if !seen[d.Queue] {
				seen[d.Queue] = true
				o.ObserveFloat64(age, snap.OldestAge(d.Queue).Seconds(), metric.WithAttributes(q))
			}
		}
		for _, st := range snap.Stats {
			if !seen[st.Queue] {
				seen[st.Queue] = true
				o.ObserveFloat64(age, snap.OldestAge(st.Queue).Seconds(), metric.WithAttributes(AttrQueue.String(st.Queue)))
			}
		}
		return nil
	}, jobs, age)
	return err
}

// Instrument sets m as w's Observer and adds m's Middleware, and returns w.
func (m *Metrics) Instrument(w *queue.Worker) *queue.Worker {
	return w.Observer(m).Use(m.Middleware())
}

func jobAttrs(j queue.Job) metric.MeasurementOption {
	return metric.WithAttributes(AttrQueue.String(j.QueueName()), AttrJob.String(j.Name))
}

// Observe counts the recorded outcome of an attempt (queue.Observer).
func (m *Metrics) Observe(e queue.Event) {
	ctx := context.Background()
	a := jobAttrs(e.Job)
	switch e.Kind {
	case queue.EventDone:
		m.processed.Add(ctx, 1, a)
	case queue.EventRetried:
		m.failed.Add(ctx, 1, a)
		m.retried.Add(ctx, 1, a)
	case queue.EventFailed:
		m.failed.Add(ctx, 1, a)
		m.dead.Add(ctx, 1, a)
	case queue.EventLeaseLost:
		m.leaseLost.Add(ctx, 1, a)
	case queue.EventCancelled:
		m.cancelled.Add(ctx, 1, a)
	case queue.EventSnoozed:
		m.snoozed.Add(ctx, 1, a)
	}
}

// Middleware measures each attempt's wait and runtime and counts it in
// flight while the handler runs (panics included).
func (m *Metrics) Middleware() queue.Middleware {
	return func(next queue.Handler) queue.Handler {
		return func(ctx context.Context, j queue.Job) error {
			start := time.Now()
			a := jobAttrs(j)
			if ws := j.WaitStart(); !ws.IsZero() {
				m.wait.Record(ctx, max(start.Sub(ws), 0).Seconds(), a)
			}
			qa := metric.WithAttributes(AttrQueue.String(j.QueueName()))
			m.inFlight.Add(ctx, 1, qa)
			defer func() {
				m.inFlight.Add(context.WithoutCancel(ctx), -1, qa)
				m.runtime.Record(context.WithoutCancel(ctx), time.Since(start).Seconds(), a)
			}()
			return next(ctx, j)
		}
	}
}

var _ queue.Observer = (*Metrics)(nil)
