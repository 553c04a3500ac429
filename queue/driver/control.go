package driver

import (
	"context"
	"errors"
	"time"
)

// StateCancelled is the state of a job cancelled before it finished. It is
// kept, like a done job, for the driver's retention of finished jobs, and
// never runs again.
const StateCancelled JobState = "cancelled"

// ErrFinished reports a cancel of a job that has already finished (done,
// dead or cancelled).
var ErrFinished = errors.New("queue: job already finished")

// ErrCancelled is the cause of a handler's context cancelled because its
// job was cancelled (see Canceller), and the error recorded for it.
var ErrCancelled = errors.New("queue: job cancelled")

// Canceller is a Queue whose jobs can be cancelled by ID from any process
// that shares the store.
type Canceller interface {
	// Cancel cancels the active job id. A ready or scheduled job (new or
	// waiting to be retried) becomes StateCancelled at once and never runs.
	// A running job becomes StateCancelled in the store at once as well:
	// its lease is then lost (Ack, Nack, Fail and Extend return
	// ErrLeaseLost), and the process that runs it learns of the cancel
	// through CancelledSince and cancels its handler's context. Either
	// way the job's unique key is freed. Cancel returns the state the job
	// was in, ErrNotFound when no job has that ID, and ErrFinished when it
	// has already finished.
	Cancel(ctx context.Context, id string) (JobState, error)

	// CancelledSince returns the leases of jobs cancelled while running at
	// or after since (by the cancelling process's clock), so a worker can
	// stop the handlers it runs for them. Drivers may return more (older
	// cancels); callers match the leases they hold.
	CancelledSince(ctx context.Context, since time.Time) ([]Lease, error)
}

// Snoozer is a Queue that can put a running job back without counting its
// attempt.
type Snoozer interface {
	// Snooze releases the job under l until at, as Nack does, but gives
	// its attempt back: Attempts goes down by one. When counted is true,
	// the job's Snoozes goes up by one (the Worker caps those); limiters
	// snooze uncounted. It returns ErrLeaseLost if l is not current.
	Snooze(ctx context.Context, l Lease, at time.Time, counted bool) error
}
