package queue

import (
	"errors"
	"fmt"
)

// Sentinel errors. Drivers return them (possibly wrapped) so callers can test
// with errors.Is whatever driver is in use.
var (
	// ErrDuplicate reports a push whose unique key, or whose ID, is held by
	// an active job. Nothing was stored. Dispatch turns it into nil; Enqueue
	// reports it as a duplicate.
	ErrDuplicate = errors.New("queue: duplicate job")

	// ErrLeaseLost reports an Ack, Nack, Fail or Extend whose lease is no
	// longer valid: it expired (whether or not the job was reserved again),
	// or the job was already finished or does not exist. The call changed
	// nothing; an expired job is delivered again.
	ErrLeaseLost = errors.New("queue: lease lost")

	// ErrNotFound reports an ID that names no job in the state the call needs
	// (for example RetryDead on a job that is not a dead letter).
	ErrNotFound = errors.New("queue: job not found")

	// ErrBadCursor reports a JobFilter.After that is not a cursor the
	// driver's ListJobs returned (a mistyped or foreign value). Nothing was
	// read; start again from the first page.
	ErrBadCursor = errors.New("queue: not a cursor ListJobs returned")

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

	// ErrUnsupported reports that a driver lacks an optional ability.
	ErrUnsupported = errors.New("queue: not supported by this driver")

	// ErrConfig marks a driver error that retrying cannot fix: a missing
	// table, a schema version this release does not know, bad credentials,
	// a database that does not exist. Drivers wrap such errors with it;
	// Worker.Run returns them instead of retrying, while other driver
	// errors are taken as transient and retried with backoff.
	ErrConfig = errors.New("queue: configuration error")
)

// DuplicateError is the error a driver may return for a duplicate push when
// it knows which active job holds the key. It matches ErrDuplicate.
type DuplicateError struct {
	// ExistingID is the ID of the active job that holds the key or ID; it
	// may be empty when the driver cannot tell cheaply.
	ExistingID string
	// UniqueKey is the key that collided, empty for an ID collision.
	UniqueKey string
}

func (e *DuplicateError) Error() string {
	if e.UniqueKey != "" {
		return fmt.Sprintf("queue: duplicate job: unique key %q is held by active job %s", e.UniqueKey, e.ExistingID)
	}
	return fmt.Sprintf("queue: duplicate job: id %s is active", e.ExistingID)
}

// Is makes a DuplicateError match ErrDuplicate.
func (e *DuplicateError) Is(target error) bool { return target == ErrDuplicate }

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
