package queue_test

import (
	"errors"
	"testing"
	"time"

	"github.com/meridianjobs/meridian/memqueue"
	"github.com/meridianjobs/meridian/queue"
)

// Account is a job that names its own limit key.
type Account struct{ ID string }

func (a Account) LimitKey() string { return "account:" + a.ID }

func TestLimiterArguments(t *testing.T) {
	t.Parallel()
	l, err := queue.NewLimiter(memqueue.New(), nil)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		make func() (queue.Middleware, error)
		ok   bool
	}{
		{"rate", func() (queue.Middleware, error) { return l.Rate(queue.KeyByName, 10, time.Second) }, true},
		{"rate without key", func() (queue.Middleware, error) { return l.Rate(nil, 10, time.Second) }, false},
		{"rate of zero", func() (queue.Middleware, error) { return l.Rate(queue.KeyByName, 0, time.Second) }, false},
		{"rate per nothing", func() (queue.Middleware, error) { return l.Rate(queue.KeyByName, 1, 0) }, false},
		{"concurrency", func() (queue.Middleware, error) { return l.Concurrency(queue.KeyByQueue, 1, time.Minute, 0) }, true},
		{"concurrency of zero", func() (queue.Middleware, error) { return l.Concurrency(queue.KeyByQueue, 0, time.Minute, 0) }, false},
		{"concurrency expiring at once", func() (queue.Middleware, error) { return l.Concurrency(queue.KeyByQueue, 1, time.Millisecond, 0) }, false},
		{"throttle", func() (queue.Middleware, error) {
			return l.ThrottleErrors(queue.KeyByName, 3, time.Minute, time.Minute)
		}, true},
		{"throttle of zero", func() (queue.Middleware, error) {
			return l.ThrottleErrors(queue.KeyByName, 0, time.Minute, time.Minute)
		}, false},
		{"throttle without backoff", func() (queue.Middleware, error) { return l.ThrottleErrors(queue.KeyByName, 1, time.Minute, 0) }, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mw, err := tc.make()
			if tc.ok != (err == nil) || tc.ok != (mw != nil) {
				t.Fatalf("got %v, %v; want ok %v", mw != nil, err, tc.ok)
			}
			if err != nil && !errors.Is(err, queue.ErrLimit) {
				t.Errorf("error %v does not match ErrLimit", err)
			}
		})
	}
	if _, err := queue.NewLimiter(plainQueue{memqueue.New()}, nil); !errors.Is(err, queue.ErrUnsupported) {
		t.Errorf("NewLimiter over a queue that is no Leaser: %v, want ErrUnsupported", err)
	}
}

func TestKeyFrom(t *testing.T) {
	t.Parallel()
	key := queue.KeyFrom[Account]()
	mine, err := queue.NewJob(Account{ID: "42"})
	if err != nil {
		t.Fatal(err)
	}
	other, err := queue.NewJob(Greet{})
	if err != nil {
		t.Fatal(err)
	}
	broken := mine
	broken.Payload = []byte("not json")
	tests := []struct {
		name string
		j    queue.Job
		want string
	}{
		{"its own type", mine, "account:42"},
		{"another type", other, ""},
		{"undecodable", broken, ""},
	}
	for _, tc := range tests {
		if got := key(tc.j); got != tc.want {
			t.Errorf("%s: key %q, want %q", tc.name, got, tc.want)
		}
	}
	if got := queue.KeyByQueue(queue.Job{}); got != "queue:default" {
		t.Errorf("KeyByQueue of a job without a queue = %q", got)
	}
}
