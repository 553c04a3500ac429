// Package otelqueue traces Meridian jobs from dispatch to handler and
// records their metrics with OpenTelemetry (go.opentelemetry.io/otel). A
// program that does not import it links no OpenTelemetry code.
//
// # Tracing
//
// On the producer side, wrap the queue (or a transaction-bound Pusher) with
// queue.Intercept and the interceptor from DispatchInterceptor: every
// Dispatch then starts a producer span "send <queue>" (a child of the
// span in the dispatching context) and injects its context into the job's
// Meta with the propagator (W3C traceparent and tracestate by default when
// the global propagator is propagation.TraceContext):
//
//	p := queue.Intercept(q, otelqueue.DispatchInterceptor())
//	err := queue.Dispatch(ctx, p, SendEmail{To: to})
//
// On the worker side, Middleware extracts that context and starts a
// consumer span "process <queue>" around the handler: by default a child
// of the producer span, so one trace covers the request and the job; with
// WithNewRoot a new trace linked to the producer's, for traces that would
// otherwise span hours of waiting. The span records the handler's error
// (status Error) and a panic (recorded, then re-raised for the worker to
// recover as it always does).
//
//	w.Use(otelqueue.Middleware())
//
// Spans carry the messaging semantic conventions' attributes:
// messaging.system = "meridian", messaging.operation.type ("send" or
// "process"), messaging.operation.name, messaging.destination.name (the
// queue), messaging.message.id (the job ID), and Meridian's own
// messaging.meridian.job.name and messaging.meridian.job.attempt.
//
// The global TracerProvider and TextMapPropagator are used unless
// WithTracerProvider and WithPropagator say otherwise. OpenTelemetry's
// default global propagator propagates nothing: set one with
// otel.SetTextMapPropagator(propagation.TraceContext{}) or pass
// WithPropagator.
//
// # Metrics
//
// NewMetrics records the set that package promqueue exports, on a
// metric.MeterProvider: counters meridian.jobs.processed, .failed,
// .retried, .dead_lettered and .lease_lost, histograms meridian.job.runtime
// and meridian.job.wait (seconds), the up-down counter
// meridian.jobs.in_flight, and with WithInspector the store's gauges
// meridian.queue.jobs (by state) and meridian.queue.oldest_ready.age. A
// Prometheus exporter turns these names into promqueue's.
package otelqueue
