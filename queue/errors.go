package queue

import (
	"errors"

	"github.com/meridianjobs/meridian/queue/driver"
)

// Sentinel errors. Drivers return them (possibly wrapped) so callers can test
// with errors.Is whatever driver is in use.
var (
	// ErrEmpty reports that no job was ready. Nothing in this module
	// returns it today (Reserve returns no jobs and no error instead); it is
	// kept for code written against the cookbook, and a driver or helper
	// that waits for a job and gives up may return it.
	ErrEmpty = errors.New("queue: empty")

	// ErrUnknownJob marks the error a worker records for a job whose name
	// has no handler. Such jobs are dead-lettered at once.
	ErrUnknownJob = errors.New("queue: no handler for job name")

	// ErrDecode marks the error a worker records for a payload that does not
	// decode into the handler's type. Such jobs are dead-lettered at once.
	ErrDecode = errors.New("queue: payload does not decode")

	// ErrTimeout marks an attempt that ran past its timeout.
	ErrTimeout = errors.New("queue: job timed out")

	// ErrPanic marks an attempt whose handler panicked.
	ErrPanic = errors.New("queue: handler panicked")

	// ErrAttemptsExhausted marks a job dead-lettered because its attempts
	// were used up, including by deliveries whose leases expired (crashes).
	ErrAttemptsExhausted = errors.New("queue: attempts exhausted")

	// ErrChain reports a chain that cannot be dispatched as given.
	ErrChain = errors.New("queue: invalid chain")

	// ErrNoBatches reports a Pusher or Queue that cannot store batches.
	ErrNoBatches = errors.New("queue: the store does not support batches")

	// ErrLimit reports limit middleware built with bad arguments.
	ErrLimit = errors.New("queue: invalid limit")

	// ErrLeadershipLost is the cause (context.Cause) of an OnElected
	// context that ended because the term ended: the lease could not be
	// renewed before its margin, or the store gave it to another holder.
	ErrLeadershipLost = errors.New("queue: leadership lost")

	// ErrTerminated is what Worker.Run returns after a fleet command
	// terminated the worker (meridian workers terminate, the dashboard's
	// Workers page; see driver.Fleet): it stopped reserving, let its
	// running jobs finish within ShutdownTimeout and flushed. Exit the
	// process with a status its supervisor restarts on (see
	// docs/operations.md, "Deploying").
	ErrTerminated = errors.New("queue: worker terminated by a fleet command")

	// The sentinel errors of the store contract (see package driver).
	ErrBadCursor   = driver.ErrBadCursor
	ErrBatch       = driver.ErrBatch
	ErrBatchClosed = driver.ErrBatchClosed
	ErrBulkState   = driver.ErrBulkState
	ErrCancelled   = driver.ErrCancelled
	ErrConfig      = driver.ErrConfig
	ErrDuplicate   = driver.ErrDuplicate
	ErrFenced      = driver.ErrFenced
	ErrFinished    = driver.ErrFinished
	ErrInvalid     = driver.ErrInvalid
	ErrLeaseLost   = driver.ErrLeaseLost
	ErrNotFound    = driver.ErrNotFound
	ErrNoResult    = driver.ErrNoResult
	ErrUnsupported = driver.ErrUnsupported
)

// permanentError marks a handler error that must not be retried.
type permanentError struct{ err error }

func (e permanentError) Error() string { return e.err.Error() }
func (e permanentError) Unwrap() error { return e.err }

// Permanent wraps err so the worker dead-letters the job at once instead of
// retrying it. errors.Is and errors.As still see err.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return permanentError{err}
}

// IsPermanent reports whether err was marked with Permanent.
func IsPermanent(err error) bool {
	var p permanentError
	return errors.As(err, &p)
}
