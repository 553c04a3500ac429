package otelqueue

import (
	"context"
	"errors"
	"fmt"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/meridianjobs/meridian/queue"
)

// ScopeName is the instrumentation scope of the tracer and meter.
const ScopeName = "github.com/meridianjobs/meridian/observe/otelqueue"

// The attribute keys the spans carry.
const (
	AttrSystem        = attribute.Key("messaging.system")
	AttrOperationType = attribute.Key("messaging.operation.type")
	AttrOperationName = attribute.Key("messaging.operation.name")
	AttrDestination   = attribute.Key("messaging.destination.name")
	AttrMessageID     = attribute.Key("messaging.message.id")
	AttrJobName       = attribute.Key("messaging.meridian.job.name")
	AttrAttempt       = attribute.Key("messaging.meridian.job.attempt")
	AttrDuplicate     = attribute.Key("messaging.meridian.duplicate")
)

// System is the value of messaging.system.
const System = "meridian"

// Option configures the interceptor, the middleware and the metrics.
type Option func(*config)

type config struct {
	tp      trace.TracerProvider
	prop    propagation.TextMapPropagator
	newRoot bool
}

func newConfig(opts []Option) config {
	var c config
	for _, o := range opts {
		o(&c)
	}
	if c.tp == nil {
		c.tp = otel.GetTracerProvider()
	}
	if c.prop == nil {
		c.prop = otel.GetTextMapPropagator()
	}
	return c
}

// WithTracerProvider uses tp instead of the global TracerProvider.
func WithTracerProvider(tp trace.TracerProvider) Option { return func(c *config) { c.tp = tp } }

// WithPropagator uses p instead of the global TextMapPropagator to carry
// the trace context in Job.Meta. Producer and consumer must agree.
func WithPropagator(p propagation.TextMapPropagator) Option { return func(c *config) { c.prop = p } }

// WithNewRoot makes each consumer span the root of a new trace, linked to
// the producer's span, instead of its child.
func WithNewRoot() Option { return func(c *config) { c.newRoot = true } }

// DispatchInterceptor returns the producer side: for queue.Intercept, it
// starts a producer span per pushed job and injects its context into the
// job's Meta. A push that fails sets the span's status to Error; one
// skipped as a duplicate is marked with messaging.meridian.duplicate.
func DispatchInterceptor(opts ...Option) queue.DispatchInterceptor {
	c := newConfig(opts)
	tracer := c.tp.Tracer(ScopeName)
	return func(ctx context.Context, j *queue.Job) (context.Context, func(error)) {
		q := j.QueueName()
		ctx, span := tracer.Start(ctx, "send "+q,
			trace.WithSpanKind(trace.SpanKindProducer),
			trace.WithAttributes(
				AttrSystem.String(System),
				AttrOperationType.String("send"),
				AttrOperationName.String("send"),
				AttrDestination.String(q),
				AttrMessageID.String(j.ID),
				AttrJobName.String(j.Name),
			))
		c.prop.Inject(ctx, propagation.MapCarrier(j.Meta))
		return ctx, func(err error) {
			switch {
			case errors.Is(err, queue.ErrDuplicate):
				span.SetAttributes(AttrDuplicate.Bool(true))
			case err != nil:
				span.RecordError(err)
				span.SetStatus(codes.Error, err.Error())
			}
			span.End()
		}
	}
}

// Middleware returns the consumer side: for Worker.Use, it starts a
// consumer span around each attempt from the trace context in the job's
// Meta, records the handler's error or panic on it, and passes the span's
// context to the handler.
func Middleware(opts ...Option) queue.Middleware {
	c := newConfig(opts)
	tracer := c.tp.Tracer(ScopeName)
	return func(next queue.Handler) queue.Handler {
		return func(ctx context.Context, j queue.Job) (err error) {
			q := j.QueueName()
			parent := c.prop.Extract(ctx, propagation.MapCarrier(j.Meta))
			sopts := []trace.SpanStartOption{
				trace.WithSpanKind(trace.SpanKindConsumer),
				trace.WithAttributes(
					AttrSystem.String(System),
					AttrOperationType.String("process"),
					AttrOperationName.String("process"),
					AttrDestination.String(q),
					AttrMessageID.String(j.ID),
					AttrJobName.String(j.Name),
					AttrAttempt.Int(j.Attempts),
				),
			}
			start := parent
			if c.newRoot {
				start = ctx
				sopts = append(sopts, trace.WithNewRoot())
				if sc := trace.SpanContextFromContext(parent); sc.IsValid() {
					sopts = append(sopts, trace.WithLinks(trace.Link{SpanContext: sc}))
				}
			}
			ctx, span := tracer.Start(start, "process "+q, sopts...)
			defer func() {
				if p := recover(); p != nil {
					perr := fmt.Errorf("panic: %v", p)
					span.RecordError(perr, trace.WithStackTrace(true))
					span.SetStatus(codes.Error, perr.Error())
					span.End()
					panic(p)
				}
				if err != nil {
					span.RecordError(err)
					span.SetStatus(codes.Error, err.Error())
				}
				span.End()
			}()
			return next(ctx, j)
		}
	}
}
