package queuetest_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/meridianjobs/meridian/internal/observetest"
	"github.com/meridianjobs/meridian/memqueue"
	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
	"github.com/meridianjobs/meridian/queuetest"
)

type SendEmail struct{ To string }
type ChargeCard struct{ Cents int }

// recorder is a testing.TB whose failures are recorded, not reported.
type recorder struct {
	testing.TB
	errors []string
	fatal  bool
}

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, args ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}
func (r *recorder) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	r.fatal = true
}

func dispatchSome(t *testing.T) *queuetest.Fake {
	t.Helper()
	f := queuetest.NewFake()
	ctx := context.Background()
	for _, err := range []error{
		queue.Dispatch(ctx, f, SendEmail{To: "ada@example.com"}, queue.OnQueue("emails"), queue.Delay(time.Minute), queue.Tags("welcome")),
		queue.Dispatch(ctx, f, SendEmail{To: "bob@example.com"}, queue.OnQueue("emails"), queue.Priority(5)),
		queue.Dispatch(ctx, f, SendEmail{To: "bob@example.com"}, queue.Unique("bob"), queue.MaxAttempts(2), queue.Timeout(time.Second), queue.Meta("k", "v")),
		queue.Dispatch(ctx, f, SendEmail{To: "bob@example.com"}, queue.Unique("bob")), // a duplicate: not recorded
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	return f
}

func TestAssertionsPass(t *testing.T) {
	t.Parallel()
	f := dispatchSome(t)
	ada := func(e SendEmail) bool { return e.To == "ada@example.com" }
	bob := func(e SendEmail) bool { return e.To == "bob@example.com" }
	for name, ok := range map[string]bool{
		"any":            queuetest.AssertDispatched[SendEmail](t, f, nil),
		"delayed":        queuetest.AssertDispatched(t, f, ada, queuetest.OnQueue("emails"), queuetest.Delayed(time.Minute), queuetest.Tagged("welcome")),
		"priority":       queuetest.AssertDispatched(t, f, bob, queuetest.OnQueue("emails"), queuetest.WithPriority(5), queuetest.Delayed(0)),
		"options":        queuetest.AssertDispatched(t, f, bob, queuetest.OnQueue(queue.DefaultQueue), queuetest.WithUnique("bob"), queuetest.WithMaxAttempts(2), queuetest.WithTimeout(time.Second), queuetest.WithMeta("k", "v")),
		"times":          queuetest.AssertDispatchedTimes(t, f, 2, bob),
		"times checked":  queuetest.AssertDispatchedTimes[SendEmail](t, f, 2, nil, queuetest.OnQueue("emails")),
		"not other type": queuetest.AssertNotDispatched[ChargeCard](t, f, nil),
		"not other key":  queuetest.AssertNotDispatched(t, f, ada, queuetest.WithUnique("ada")),
	} {
		if !ok {
			t.Errorf("assertion %q failed", name)
		}
	}
	if got := queuetest.Dispatched[SendEmail](f); len(got) != 3 || got[0].To != "ada@example.com" {
		t.Errorf("Dispatched = %v", got)
	}
}

func TestFailureMessagesSayWhatWasDispatched(t *testing.T) {
	t.Parallel()
	f := dispatchSome(t)
	for _, tc := range []struct {
		name   string
		assert func(tb testing.TB) bool
		want   []string
	}{
		{"wrong type", func(tb testing.TB) bool { return queuetest.AssertDispatched[ChargeCard](tb, f, nil) },
			[]string{"no ChargeCard was dispatched", "dispatched instead (3):", `SendEmail on queue emails: {"To":"ada@example.com"} delayed 1m0s tags [welcome]`, "priority 5", "unique bob"}},
		{"wrong queue", func(tb testing.TB) bool {
			return queuetest.AssertDispatched(tb, f, func(e SendEmail) bool { return e.To == "ada@example.com" }, queuetest.OnQueue("default"))
		}, []string{"no SendEmail matching the predicate, on queue default was dispatched"}},
		{"wrong delay", func(tb testing.TB) bool {
			return queuetest.AssertDispatched[SendEmail](tb, f, nil, queuetest.Delayed(time.Hour))
		}, []string{"delayed 1h0m0s was dispatched", "delayed 1m0s"}},
		{"unexpected", func(tb testing.TB) bool { return queuetest.AssertNotDispatched[SendEmail](tb, f, nil) },
			[]string{"3 SendEmail dispatched, want none"}},
		{"times", func(tb testing.TB) bool { return queuetest.AssertDispatchedTimes[SendEmail](tb, f, 1, nil) },
			[]string{"3 SendEmail dispatched, want 1"}},
		{"nothing", func(tb testing.TB) bool { return queuetest.AssertNothingDispatched(tb, f) },
			[]string{"want nothing dispatched"}},
		{"empty fake", func(tb testing.TB) bool { return queuetest.AssertDispatched[SendEmail](tb, queuetest.NewFake(), nil) },
			[]string{"nothing was dispatched"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{TB: t}
			if tc.assert(rec) {
				t.Fatal("the assertion passed")
			}
			if len(rec.errors) != 1 {
				t.Fatalf("%d errors reported, want 1: %q", len(rec.errors), rec.errors)
			}
			for _, w := range tc.want {
				if !strings.Contains(rec.errors[0], w) {
					t.Errorf("the message lacks %q:\n%s", w, rec.errors[0])
				}
			}
		})
	}
}

func TestFakeFailWith(t *testing.T) {
	t.Parallel()
	f := queuetest.NewFake()
	down := errors.New("down")
	f.FailWith(down)
	if err := queue.Dispatch(context.Background(), f, ChargeCard{}); !errors.Is(err, down) {
		t.Fatalf("Dispatch = %v, want %v", err, down)
	}
	if n, err := queue.DispatchMany(context.Background(), f, []ChargeCard{{1}}); n != 0 || !errors.Is(err, down) {
		t.Fatalf("DispatchMany = %d, %v", n, err)
	}
	queuetest.AssertNothingDispatched(t, f)
	f.FailWith(nil)
	if n, err := queue.DispatchMany(context.Background(), f, []ChargeCard{{1}, {2}}); n != 2 || err != nil {
		t.Fatalf("DispatchMany = %d, %v", n, err)
	}
	queuetest.AssertDispatchedTimes[ChargeCard](t, f, 2, nil)
	f.Reset()
	queuetest.AssertNothingDispatched(t, f)
}

func TestRequireInserted(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		open func(t *testing.T) interface {
			queue.Queue
			driver.Inspector
		}
	}{
		{"memory", func(t *testing.T) interface {
			queue.Queue
			driver.Inspector
		} {
			return memqueue.New()
		}},
		{"postgres", func(t *testing.T) interface {
			queue.Queue
			driver.Inspector
		} {
			return observetest.Postgres(t, observetest.RandomTable(), true)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			q := tc.open(t)
			ctx := context.Background()
			if err := queue.Dispatch(ctx, q, SendEmail{To: "ada@example.com"}, queue.OnQueue("emails")); err != nil {
				t.Fatal(err)
			}
			if err := queue.Dispatch(ctx, q, SendEmail{To: "bob@example.com"}, queue.Delay(time.Hour)); err != nil {
				t.Fatal(err)
			}
			got := queuetest.RequireInserted(t, q, func(e SendEmail) bool { return e.To == "bob@example.com" }, queuetest.OnQueue(queue.DefaultQueue))
			if got.State != queue.StateScheduled {
				t.Errorf("bob's job is %s, want scheduled", got.State)
			}
			queuetest.RequireInserted[SendEmail](t, q, nil, queuetest.OnQueue("emails"))

			rec := &recorder{TB: t}
			queuetest.RequireInserted(rec, q, func(e SendEmail) bool { return e.To == "cy@example.com" })
			if !rec.fatal || len(rec.errors) != 1 ||
				!strings.Contains(rec.errors[0], "no SendEmail matching the predicate is ready or scheduled") ||
				!strings.Contains(rec.errors[0], "ada@example.com") || !strings.Contains(rec.errors[0], "bob@example.com") {
				t.Errorf("failure = %q (fatal %v)", rec.errors, rec.fatal)
			}
		})
	}
}

func TestWork(t *testing.T) {
	t.Parallel()
	w := queue.NewWorker(memqueue.New())
	var order []string
	w.Use(func(next queue.Handler) queue.Handler {
		return func(ctx context.Context, j queue.Job) error {
			order = append(order, "middleware")
			return next(ctx, j)
		}
	})
	queue.Handle(w, func(ctx context.Context, c ChargeCard) error {
		j, _ := queue.JobFromContext(ctx)
		order = append(order, fmt.Sprintf("charge %d attempt %d on %s", c.Cents, j.Attempts, j.QueueName()))
		if c.Cents < 0 {
			return errors.New("negative")
		}
		if c.Cents == 0 {
			panic("zero")
		}
		return nil
	})
	ctx := context.Background()
	if err := queuetest.Work(ctx, w, ChargeCard{Cents: 5}, queue.OnQueue("billing")); err != nil {
		t.Fatal(err)
	}
	if want := "middleware,charge 5 attempt 1 on billing"; strings.Join(order, ",") != want {
		t.Errorf("ran %q, want %q", strings.Join(order, ","), want)
	}
	if err := queuetest.Work(ctx, w, ChargeCard{Cents: -1}); err == nil || err.Error() != "negative" {
		t.Errorf("Work = %v, want the handler's error", err)
	}
	if err := queuetest.Work(ctx, w, ChargeCard{}); !errors.Is(err, queue.ErrPanic) {
		t.Errorf("Work = %v, want a panic error", err)
	}
	if err := queuetest.Work(ctx, w, SendEmail{}); !errors.Is(err, queue.ErrUnknownJob) {
		t.Errorf("Work = %v, want ErrUnknownJob", err)
	}
}

// printTB is a testing.TB that prints failures, for the examples.
type printTB struct{ testing.TB }

func (printTB) Helper() {}
func (printTB) Errorf(format string, args ...any) {
	fmt.Printf(format+"\n", args...)
}

func TestFakeRecordsBatches(t *testing.T) {
	t.Parallel()
	type Row struct{ N int }
	type Done struct{}
	f := queuetest.NewFake()
	var b queue.Batch
	for n := range 2 {
		j, err := queue.NewJob(Row{n})
		if err != nil {
			t.Fatal(err)
		}
		b.Jobs = append(b.Jobs, j)
	}
	then, _ := queue.NewJob(Done{})
	b.Then = &then
	id, err := queue.DispatchBatch(context.Background(), f, b)
	if err != nil {
		t.Fatalf("DispatchBatch on a Fake: %v", err)
	}
	jobs := f.Jobs()
	if len(jobs) != 2 || queue.BatchOf(&jobs[0]) != id || queue.BatchOf(&jobs[1]) != id {
		t.Fatalf("recorded %v, want the 2 members of batch %s", jobs, id)
	}
	recs := f.Batches()
	if len(recs) != 1 || recs[0].ID != id {
		t.Fatalf("recorded batches %v, want %s", recs, id)
	}
	cb, err := recs[0].Callback(driver.BatchThen, "", "")
	if err != nil || cb == nil || cb.Name != "Done" || cb.Meta[queue.MetaBatchOf] != id {
		t.Errorf("the recorded then callback = %+v, %v", cb, err)
	}
	f.Reset()
	if len(f.Jobs()) != 0 || len(f.Batches()) != 0 {
		t.Error("Reset kept jobs or batches")
	}
}
