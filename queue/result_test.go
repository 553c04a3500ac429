package queue_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meridianjobs/meridian/memqueue"
	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// noResults is a store without driver.Results.
type noResults struct{ queue.Queue }

func TestSetResultRules(t *testing.T) {
	t.Parallel()
	type report struct{ Size int }
	tests := []struct {
		name    string
		v       any
		wantErr error
	}{
		{"small", report{3}, nil},
		{"at the cap", strings.Repeat("a", driver.MaxResultBytes-2), nil},
		{"past the cap", strings.Repeat("a", driver.MaxResultBytes-1), queue.ErrInvalid},
		{"does not encode", make(chan int), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			w := queue.NewWorker(memqueue.New())
			var got error
			queue.Handle(w, func(ctx context.Context, _ report) error {
				got = queue.SetResult(ctx, tt.v)
				return nil
			})
			j, err := queue.NewJob(report{})
			if err != nil {
				t.Fatal(err)
			}
			if err := w.RunJob(t.Context(), j); err != nil {
				t.Fatal(err)
			}
			switch {
			case tt.name == "does not encode":
				if got == nil {
					t.Errorf("SetResult(chan) = nil, want the encoder's error")
				}
			case !errors.Is(got, tt.wantErr) || (tt.wantErr == nil) != (got == nil):
				t.Errorf("SetResult = %v, want %v", got, tt.wantErr)
			}
		})
	}
	if err := queue.SetResult(t.Context(), 1); !errors.Is(err, queue.ErrUnsupported) {
		t.Errorf("SetResult outside a handler = %v, want ErrUnsupported", err)
	}
	if _, err := queue.ResultOf[int](t.Context(), noResults{memqueue.New()}, "x", 0); !errors.Is(err, queue.ErrUnsupported) {
		t.Errorf("ResultOf on a store without results = %v, want ErrUnsupported", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := queue.ResultOf[int](ctx, memqueue.New(), "x", time.Minute); !errors.Is(err, context.Canceled) {
		t.Errorf("ResultOf under a cancelled context = %v, want context.Canceled", err)
	}
}

// recording is a store that keeps the completions it was given.
type recording struct {
	*memqueue.Queue
	mu   sync.Mutex
	outs []driver.Completion
}

func (r *recording) Complete(ctx context.Context, starts []driver.Lease, outs []driver.Completion) ([]driver.Lease, []error, error) {
	r.mu.Lock()
	r.outs = append(r.outs, outs...)
	r.mu.Unlock()
	return r.Queue.Complete(ctx, starts, outs)
}

// TestResultRidesWithAck: the Worker sends a handler's result in its
// done outcome, with the Worker's retention, and none for a job without.
func TestResultRidesWithAck(t *testing.T) {
	t.Parallel()
	type job struct{ Set bool }
	q := &recording{Queue: memqueue.New()}
	w := queue.NewWorker(q).ResultRetention(time.Hour)
	done := make(chan struct{}, 2)
	queue.Handle(w, func(ctx context.Context, j job) error {
		defer func() { done <- struct{}{} }()
		if j.Set {
			return queue.SetResult(ctx, "out")
		}
		return nil
	})
	for _, set := range []bool{true, false} {
		if err := queue.Dispatch(t.Context(), q, job{set}); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	ctx, cancel := context.WithCancel(t.Context())
	ran := make(chan error, 1)
	go func() { ran <- w.Run(ctx) }()
	<-done
	<-done
	cancel()
	if err := <-ran; err != nil {
		t.Fatal(err)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	var with, without int
	for _, o := range q.outs {
		switch {
		case o.Outcome != driver.OutcomeDone:
		case o.Result == nil:
			without++
			if !o.ResultUntil.IsZero() {
				t.Errorf("an outcome without a result carries ResultUntil %v", o.ResultUntil)
			}
		default:
			with++
			if string(o.Result) != `"out"` || o.ResultUntil.Before(start.Add(time.Hour)) || o.ResultUntil.After(time.Now().Add(time.Hour)) {
				t.Errorf("the outcome carries result %q until %v, want \"out\" an hour after the ack", o.Result, o.ResultUntil)
			}
		}
	}
	if with != 1 || without != 1 {
		t.Errorf("%d done outcomes with a result and %d without, want 1 and 1", with, without)
	}
}
