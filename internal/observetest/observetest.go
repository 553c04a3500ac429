// Package observetest holds what the tests of the observe packages share:
// a PostgreSQL queue on a table of its own, opened through the public API,
// and a known workload of successes, retries and dead letters.
package observetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/sqlqueue"
	"github.com/meridianjobs/meridian/sqlqueue/postgres"
)

// PostgresDSN returns MERIDIAN_POSTGRES_DSN, skipping the test when it is
// unset (failing it under CI=true).
func PostgresDSN(t testing.TB) string {
	t.Helper()
	dsn := os.Getenv("MERIDIAN_POSTGRES_DSN")
	if dsn == "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("MERIDIAN_POSTGRES_DSN is not set")
		}
		t.Skip("MERIDIAN_POSTGRES_DSN is not set: skipping the PostgreSQL test")
	}
	return dsn
}

// RandomTable returns a table name no other test uses.
func RandomTable() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "mobs_" + hex.EncodeToString(b[:])
}

// Postgres opens a queue on table with postgres.Open (which sets it up),
// closed when the test ends; drop says whether this call also drops the
// table then (only one of several queues on a table should).
func Postgres(t testing.TB, table string, drop bool) *postgres.Queue {
	t.Helper()
	dsn := PostgresDSN(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	q, err := postgres.Open(ctx, dsn, sqlqueue.WithTable(table))
	if err != nil {
		if os.Getenv("CI") != "true" {
			t.Skipf("PostgreSQL at MERIDIAN_POSTGRES_DSN is unusable: %v", err)
		}
		t.Fatalf("postgres.Open: %v", err)
	}
	t.Cleanup(func() {
		if drop {
			if err := q.DropTables(context.Background()); err != nil {
				t.Errorf("DropTables: %v", err)
			}
		}
		if err := q.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return q
}

// Task is the workload's job: it fails its first FailTimes attempts and,
// when Permanent, fails for good.
type Task struct {
	N         int
	FailTimes int
	Permanent bool
}

// JobName names Task's jobs "task".
func (Task) JobName() string { return "task" }

// HandleTask is Task's handler.
func HandleTask(ctx context.Context, v Task) error {
	j, _ := queue.JobFromContext(ctx)
	if v.Permanent {
		return queue.Permanent(fmt.Errorf("task %d cannot be done", v.N))
	}
	if j.Attempts <= v.FailTimes {
		return fmt.Errorf("task %d: attempt %d fails", v.N, j.Attempts)
	}
	return nil
}

// Workload is the known mix: three jobs that succeed at once, two that
// fail once and then succeed, one that is dead-lettered at its first
// attempt. Run under a Worker with MaxRetry >= 2 it makes 5 successful
// attempts, 3 failed ones (2 retried, 1 dead-lettered): 8 attempts.
var Workload = []Task{{N: 1}, {N: 2}, {N: 3}, {N: 4, FailTimes: 1}, {N: 5, FailTimes: 1}, {N: 6, Permanent: true}}

// The workload's expected outcome.
const (
	WantProcessed = 5
	WantRetried   = 2
	WantDead      = 1
	WantFailed    = WantRetried + WantDead
	WantAttempts  = WantProcessed + WantFailed
)

// Dispatch pushes the workload to queueName through p.
func Dispatch(ctx context.Context, p queue.Pusher, queueName string) error {
	for _, v := range Workload {
		if err := queue.Dispatch(ctx, p, v, queue.OnQueue(queueName)); err != nil {
			return err
		}
	}
	return nil
}

// Settled counts recorded outcomes; Done reports when the workload has
// finished.
type Settled struct {
	ch chan queue.Event
}

// NewSettled returns a counter of outcomes.
func NewSettled() *Settled { return &Settled{ch: make(chan queue.Event, 64)} }

// Observe records a recorded outcome (queue.Observer).
func (s *Settled) Observe(e queue.Event) {
	if e.Kind == queue.EventDone || e.Kind == queue.EventFailed || e.Kind == queue.EventRetried {
		s.ch <- e
	}
}

// Wait returns once the workload's 8 outcomes have been observed, or an
// error after timeout.
func (s *Settled) Wait(timeout time.Duration) error {
	deadline := time.After(timeout)
	for n := 0; n < WantAttempts; n++ {
		select {
		case <-s.ch:
		case <-deadline:
			return errors.New("the workload did not finish in time")
		}
	}
	return nil
}

// RunWorker starts w, returning a function that stops it and returns Run's
// error.
func RunWorker(w *queue.Worker) (stop func() error) {
	done := make(chan error, 1)
	go func() { done <- w.Run(context.Background()) }()
	return func() error {
		w.Stop()
		return <-done
	}
}

// Quiet returns a logger that discards everything, for workers in tests.
func Quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }
