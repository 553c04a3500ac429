package driver

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

	// ErrLeaseLost reports an outcome or an extension whose lease is no
	// longer valid: it expired (whether or not the job was reserved again),
	// or the job was already finished or does not exist. Nothing changed
	// for that job; an expired job is delivered again.
	ErrLeaseLost = errors.New("queue: lease lost")

	// ErrNotFound reports an ID that names no job in the state the call needs
	// (for example RetryDead on a job that is not a dead letter).
	ErrNotFound = errors.New("queue: job not found")

	// ErrBadCursor reports a JobFilter.After that is not a cursor the
	// driver's ListJobs returned (a mistyped or foreign value). Nothing was
	// read; start again from the first page.
	ErrBadCursor = errors.New("queue: not a cursor ListJobs returned")

	// ErrUnsupported reports that a driver lacks an optional ability.
	ErrUnsupported = errors.New("queue: not supported by this driver")

	// ErrConfig marks a driver error that retrying cannot fix: a missing
	// table, a schema version this release does not know, bad credentials,
	// a database that does not exist. Drivers wrap such errors with it;
	// Worker.Run returns them instead of retrying, while other driver
	// errors are taken as transient and retried with backoff.
	ErrConfig = errors.New("queue: configuration error")

	// ErrFenced reports a write refused because it carried a stale Fence:
	// the lease it names has passed to a newer term (a higher epoch)
	// since the writer was elected. The writer is no longer the leader.
	ErrFenced = errors.New("queue: fenced: the lease has a newer epoch")
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
