package otelqueue_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/meridianjobs/meridian/internal/observetest"
	"github.com/meridianjobs/meridian/memqueue"
	"github.com/meridianjobs/meridian/observe/otelqueue"
	"github.com/meridianjobs/meridian/queue"
)

type note struct{ Text string }

func attrOf(s sdktrace.ReadOnlySpan, k attribute.Key) (attribute.Value, bool) {
	for _, kv := range s.Attributes() {
		if kv.Key == k {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

// spansNamed returns the ended spans called name.
func spansNamed(rec *tracetest.SpanRecorder, name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

// traceOnce dispatches one note under a request span through q and runs a
// worker until it has settled (a first failing attempt, then a success),
// returning the recorder.
func traceOnce(t *testing.T, q queue.Queue, opts ...otelqueue.Option) (*tracetest.SpanRecorder, trace.SpanContext) {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	opts = append([]otelqueue.Option{otelqueue.WithTracerProvider(tp), otelqueue.WithPropagator(propagation.TraceContext{})}, opts...)

	ctx, req := tp.Tracer("test").Start(context.Background(), "request")
	p := queue.Intercept(q, otelqueue.DispatchInterceptor(opts...))
	if err := queue.Dispatch(ctx, p, note{Text: "hi"}, queue.OnQueue("traced")); err != nil {
		t.Fatal(err)
	}
	req.End()

	settled := make(chan queue.Event, 4)
	var handlerSpan trace.SpanContext
	w := queue.NewWorker(q).Queues("traced").MaxRetry(3).Backoff(0).Poll(20 * time.Millisecond).Slog(observetest.Quiet())
	w.Use(otelqueue.Middleware(opts...)).Observer(queue.ObserverFunc(func(e queue.Event) {
		if e.Kind == queue.EventDone || e.Kind == queue.EventRetried || e.Kind == queue.EventFailed {
			settled <- e
		}
	}))
	queue.Handle(w, func(ctx context.Context, n note) error {
		j, _ := queue.JobFromContext(ctx)
		if j.Attempts == 1 {
			return errors.New("first attempt fails")
		}
		handlerSpan = trace.SpanContextFromContext(ctx)
		return nil
	})
	stop := observetest.RunWorker(w)
	// The first attempt's retry is reported once its Nack is stored, by
	// which time the second attempt may already have run and been acked:
	// the two events come in either order.
	var got []queue.EventKind
	for range 2 {
		select {
		case e := <-settled:
			got = append(got, e.Kind)
		case <-time.After(60 * time.Second):
			_ = stop()
			t.Fatal("the job did not settle in time")
		}
	}
	if !slices.Contains(got, queue.EventRetried) || !slices.Contains(got, queue.EventDone) {
		t.Errorf("events %v, want one retried and one done", got)
	}
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	return rec, handlerSpan
}

func checkTrace(t *testing.T, rec *tracetest.SpanRecorder, handlerSpan trace.SpanContext, linked bool) {
	t.Helper()
	reqs := spansNamed(rec, "request")
	sends := spansNamed(rec, "send traced")
	procs := spansNamed(rec, "process traced")
	if len(reqs) != 1 || len(sends) != 1 || len(procs) != 2 {
		t.Fatalf("got %d request, %d send and %d process spans, want 1, 1 and 2", len(reqs), len(sends), len(procs))
	}
	send := sends[0]
	if send.Parent().SpanID() != reqs[0].SpanContext().SpanID() || send.SpanKind() != trace.SpanKindProducer {
		t.Errorf("the send span is not the request's producer child: parent %v kind %v", send.Parent().SpanID(), send.SpanKind())
	}
	for i, p := range procs {
		if p.SpanKind() != trace.SpanKindConsumer {
			t.Errorf("process span %d has kind %v", i, p.SpanKind())
		}
		if linked {
			if p.Parent().IsValid() || len(p.Links()) != 1 || p.Links()[0].SpanContext.SpanID() != send.SpanContext().SpanID() {
				t.Errorf("process span %d is not a new root linked to the send span: parent %v links %v", i, p.Parent(), p.Links())
			}
		} else if p.Parent().SpanID() != send.SpanContext().SpanID() || p.SpanContext().TraceID() != send.SpanContext().TraceID() {
			t.Errorf("process span %d is not a child of the send span: parent %v", i, p.Parent())
		}
		for k, want := range map[attribute.Key]attribute.Value{
			otelqueue.AttrSystem:      attribute.StringValue("meridian"),
			otelqueue.AttrDestination: attribute.StringValue("traced"),
			otelqueue.AttrMessageID:   attribute.StringValue(mustAttr(t, send, otelqueue.AttrMessageID).AsString()),
			otelqueue.AttrJobName:     attribute.StringValue("note"),
			otelqueue.AttrAttempt:     attribute.IntValue(i + 1),
		} {
			if got, _ := attrOf(p, k); got != want {
				t.Errorf("process span %d: %s = %v, want %v", i, k, got, want)
			}
		}
	}
	if procs[0].Status().Code != codes.Error || len(procs[0].Events()) == 0 {
		t.Errorf("the failed attempt's span has status %v and %d events, want Error and the recorded error", procs[0].Status(), len(procs[0].Events()))
	}
	if procs[1].Status().Code == codes.Error {
		t.Errorf("the successful attempt's span has status %v", procs[1].Status())
	}
	if handlerSpan.SpanID() != procs[1].SpanContext().SpanID() {
		t.Errorf("the handler's context holds span %v, want the process span %v", handlerSpan.SpanID(), procs[1].SpanContext().SpanID())
	}
}

func mustAttr(t *testing.T, s sdktrace.ReadOnlySpan, k attribute.Key) attribute.Value {
	t.Helper()
	v, ok := attrOf(s, k)
	if !ok || v.AsString() == "" {
		t.Fatalf("span %s lacks %s", s.Name(), k)
	}
	return v
}

func TestProducerConsumerAcrossPostgres(t *testing.T) {
	t.Parallel()
	q := observetest.Postgres(t, observetest.RandomTable(), true)
	rec, hs := traceOnce(t, q)
	checkTrace(t, rec, hs, false)
}

func TestProducerConsumerMemory(t *testing.T) {
	t.Parallel()
	for _, linked := range []bool{false, true} {
		var opts []otelqueue.Option
		if linked {
			opts = append(opts, otelqueue.WithNewRoot())
		}
		rec, hs := traceOnce(t, memqueue.New(), opts...)
		checkTrace(t, rec, hs, linked)
	}
}

func TestPanicIsRecordedAndReraised(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	h := otelqueue.Middleware(otelqueue.WithTracerProvider(tp))(func(context.Context, queue.Job) error { panic("boom") })
	func() {
		defer func() {
			if p := recover(); p != "boom" {
				t.Errorf("recovered %v, want the handler's panic", p)
			}
		}()
		_ = h(context.Background(), queue.Job{ID: "j1", Name: "note", Attempts: 1})
	}()
	spans := rec.Ended()
	if len(spans) != 1 || spans[0].Status().Code != codes.Error || len(spans[0].Events()) != 1 {
		t.Fatalf("want one ended span with status Error and the panic recorded, got %d spans", len(spans))
	}
}

func TestDuplicateIsMarked(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	p := queue.Intercept(memqueue.New(), otelqueue.DispatchInterceptor(otelqueue.WithTracerProvider(tp)))
	for range 2 {
		if err := queue.Dispatch(context.Background(), p, note{}, queue.Unique("k")); err != nil {
			t.Fatal(err)
		}
	}
	spans := rec.Ended()
	if len(spans) != 2 {
		t.Fatalf("%d spans, want 2", len(spans))
	}
	if _, ok := attrOf(spans[0], otelqueue.AttrDuplicate); ok {
		t.Error("the first dispatch is marked a duplicate")
	}
	if v, _ := attrOf(spans[1], otelqueue.AttrDuplicate); !v.AsBool() {
		t.Error("the second dispatch is not marked a duplicate")
	}
}

func TestMetricsMirrorPrometheus(t *testing.T) {
	t.Parallel()
	q := memqueue.New()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	m, err := otelqueue.NewMetrics(mp, otelqueue.WithInspector(q, time.Nanosecond))
	if err != nil {
		t.Fatal(err)
	}
	settled := observetest.NewSettled()
	w := queue.NewWorker(q).Queues("otel").MaxRetry(3).Backoff(0).Slog(observetest.Quiet())
	w.Observer(queue.Observers(m, settled)).Use(m.Middleware())
	queue.Handle(w, observetest.HandleTask)
	if err := observetest.Dispatch(context.Background(), q, "otel"); err != nil {
		t.Fatal(err)
	}
	stop := observetest.RunWorker(w)
	if err := settled.Wait(60 * time.Second); err != nil {
		_ = stop()
		t.Fatal(err)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, md := range sm.Metrics {
			switch d := md.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					got[md.Name] += p.Value
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					got[md.Name] += int64(p.Count)
				}
			case metricdata.Gauge[int64]:
				for _, p := range d.DataPoints {
					if st, _ := p.Attributes.Value(otelqueue.AttrState); st.AsString() == "dead" {
						got[md.Name+".dead"] += p.Value
					}
				}
			}
		}
	}
	want := map[string]int64{
		"meridian.jobs.processed":     observetest.WantProcessed,
		"meridian.jobs.failed":        observetest.WantFailed,
		"meridian.jobs.retried":       observetest.WantRetried,
		"meridian.jobs.dead_lettered": observetest.WantDead,
		"meridian.job.runtime":        observetest.WantAttempts,
		"meridian.job.wait":           observetest.WantAttempts,
		"meridian.jobs.in_flight":     0,
		"meridian.queue.jobs.dead":    observetest.WantDead,
	}
	for name, n := range want {
		if got[name] != n {
			t.Errorf("%s = %d, want %d", name, got[name], n)
		}
	}
}
