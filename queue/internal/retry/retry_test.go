package retry

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

func TestBackoffDoublesUpToMaxAndResets(t *testing.T) {
	t.Parallel()
	b := Backoff{Initial: 10 * time.Millisecond, Max: 50 * time.Millisecond}
	want := []time.Duration{10, 20, 40, 50, 50}
	for i, w := range want {
		if got := b.Next(); got != w*time.Millisecond {
			t.Fatalf("delay %d = %v, want %v", i, got, w*time.Millisecond)
		}
	}
	b.Reset()
	if got := b.Next(); got != 10*time.Millisecond {
		t.Fatalf("after Reset delay = %v, want the initial 10ms", got)
	}
}

func TestBackoffJitterStaysInUpperHalf(t *testing.T) {
	t.Parallel()
	b := Backoff{Initial: time.Second, Max: time.Second, Jitter: true}
	for range 100 {
		if d := b.Next(); d < 500*time.Millisecond || d > time.Second {
			t.Fatalf("jittered delay %v outside [500ms, 1s]", d)
		}
	}
}

var errTransient = errors.New("transient")
var errFatal = errors.New("fatal")

func TestCall(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		errs      []error // f's results, in order; nil ends
		wantErr   error
		wantCalls int
		wantSlept time.Duration
	}{
		{"first call succeeds", []error{nil}, nil, 1, 0},
		{"retries transient errors", []error{errTransient, errTransient, nil}, nil, 3, 30 * time.Millisecond},
		{"stops at a non-retryable error", []error{errTransient, errFatal, nil}, errFatal, 2, 10 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				start := time.Now()
				calls := 0
				err := Call(t.Context(), Backoff{Initial: 10 * time.Millisecond, Max: time.Second},
					func(err error) bool { return !errors.Is(err, errFatal) },
					func(context.Context) error { calls++; return tt.errs[calls-1] })
				if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil) {
					t.Errorf("Call = %v, want %v", err, tt.wantErr)
				}
				if calls != tt.wantCalls {
					t.Errorf("f called %d times, want %d", calls, tt.wantCalls)
				}
				if slept := time.Since(start); slept != tt.wantSlept {
					t.Errorf("slept %v, want %v", slept, tt.wantSlept)
				}
			})
		})
	}
}

func TestCallStopsWhenContextEnds(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 25*time.Millisecond)
		defer cancel()
		calls := 0
		err := Call(ctx, Backoff{Initial: 10 * time.Millisecond, Max: 10 * time.Millisecond}, nil,
			func(context.Context) error { calls++; return errTransient })
		if !errors.Is(err, errTransient) {
			t.Fatalf("Call = %v, want the last error of f", err)
		}
		if calls != 3 {
			t.Fatalf("f called %d times in 25ms at 10ms apart, want 3", calls)
		}
	})
}

func TestSleep(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		if err := Sleep(t.Context(), time.Second); err != nil {
			t.Fatalf("Sleep = %v", err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if err := Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
			t.Fatalf("Sleep on a done context = %v, want Canceled", err)
		}
	})
}
