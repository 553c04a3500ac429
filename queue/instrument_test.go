package queue_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/meridianjobs/meridian/memqueue"
	"github.com/meridianjobs/meridian/queue"
)

type traced struct{ N int }

// pushOnly is a Pusher without a batch insert.
type pushOnly struct{ q *memqueue.Queue }

func (p pushOnly) Push(ctx context.Context, j queue.Job) error { return p.q.Push(ctx, j) }

type ctxKey struct{}

func TestInterceptSeesEveryPush(t *testing.T) {
	t.Parallel()
	for _, batch := range []bool{true, false} {
		q := memqueue.New()
		var inner queue.Pusher = q
		if !batch {
			inner = pushOnly{q}
		}
		var log []string
		ic := func(name string) queue.DispatchInterceptor {
			return func(ctx context.Context, j *queue.Job) (context.Context, func(error)) {
				j.Meta[name] = "seen"
				log = append(log, name+" before "+j.ID)
				return context.WithValue(ctx, ctxKey{}, name), func(err error) {
					outcome := "stored"
					switch {
					case errors.Is(err, queue.ErrDuplicate):
						outcome = "duplicate"
					case err != nil:
						outcome = err.Error()
					}
					log = append(log, name+" after "+outcome)
				}
			}
		}
		p := queue.Intercept(inner, ic("a"), ic("b"))
		if p.Unwrap() != inner {
			t.Fatal("Unwrap does not return the wrapped Pusher")
		}
		ctx := context.Background()
		id, _, err := queue.Enqueue(ctx, p, traced{1}, queue.Meta("k", "v"))
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"a before " + id, "b before " + id, "b after stored", "a after stored"}
		if !slices.Equal(log, want) {
			t.Errorf("batch=%v: log %q, want %q", batch, log, want)
		}
		callerMeta := map[string]string{"k": "v"}
		if err := p.Push(ctx, queue.Job{Name: "raw", Meta: callerMeta}); err != nil {
			t.Fatal(err)
		}
		if len(callerMeta) != 1 {
			t.Errorf("the interceptors changed the caller's Meta: %v", callerMeta)
		}
		got, err := q.GetJob(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if got.Meta["a"] != "seen" || got.Meta["b"] != "seen" || got.Meta["k"] != "v" {
			t.Errorf("stored Meta %v lacks the interceptors' entries", got.Meta)
		}

		log = nil
		n, err := queue.DispatchMany(ctx, p, []traced{{2}, {3}}, queue.Unique("same"))
		if err != nil || n != 1 {
			t.Fatalf("batch=%v: DispatchMany = %d, %v; want 1 stored", batch, n, err)
		}
		afters := slices.DeleteFunc(slices.Clone(log), func(s string) bool { return !slices.Contains([]string{"a after stored", "a after duplicate"}, s) })
		if !slices.Equal(afters, []string{"a after stored", "a after duplicate"}) {
			t.Errorf("batch=%v: outcomes %q, want one stored and one duplicate", batch, log)
		}
	}
}

func TestInterceptPassesItsContextToPush(t *testing.T) {
	t.Parallel()
	var seen any
	inner := pusherFunc(func(ctx context.Context, j queue.Job) error {
		seen = ctx.Value(ctxKey{})
		return errors.New("down")
	})
	var outcome error
	p := queue.Intercept(inner, func(ctx context.Context, j *queue.Job) (context.Context, func(error)) {
		return context.WithValue(ctx, ctxKey{}, "span"), func(err error) { outcome = err }
	})
	if err := queue.Dispatch(context.Background(), p, traced{}); err == nil {
		t.Fatal("the push's error was lost")
	}
	if seen != "span" || outcome == nil || outcome.Error() != "down" {
		t.Errorf("push saw %v, outcome %v", seen, outcome)
	}
}

type pusherFunc func(ctx context.Context, j queue.Job) error

func (f pusherFunc) Push(ctx context.Context, j queue.Job) error { return f(ctx, j) }

func TestObserversAndMiddlewares(t *testing.T) {
	t.Parallel()
	var got []string
	obs := queue.Observers(
		queue.ObserverFunc(func(e queue.Event) { got = append(got, "1 "+e.Kind.String()) }),
		queue.ObserverFunc(func(e queue.Event) { got = append(got, "2 "+e.Kind.String()) }),
	)
	obs.Observe(queue.Event{Kind: queue.EventDone})
	mw := func(name string) queue.Middleware {
		return func(next queue.Handler) queue.Handler {
			return func(ctx context.Context, j queue.Job) error {
				got = append(got, name)
				return next(ctx, j)
			}
		}
	}
	h := queue.Middlewares(mw("outer"), mw("inner"))(func(context.Context, queue.Job) error {
		got = append(got, "handler")
		return nil
	})
	_ = h(context.Background(), queue.Job{})
	if want := []string{"1 done", "2 done", "outer", "inner", "handler"}; !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}
