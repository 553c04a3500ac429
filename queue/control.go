package queue

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/meridianjobs/meridian/queue/driver"
)

// CancelJob cancels the job id on q (see driver.Controller.Cancel) and returns the
// state it was in. It returns an error matching ErrUnsupported when q cannot
// cancel jobs.
func CancelJob(ctx context.Context, q Queue, id string) (driver.JobState, error) {
	caps := driver.CapabilitiesOf(q)
	c := caps.Controller
	if c == nil {
		return "", fmt.Errorf("queue: cancelling job %s: %w", id, caps.Require("Controller"))
	}
	return c.Cancel(ctx, id)
}

// Handler results that control the job rather than report a failure.

// snoozeError asks the Worker to snooze the job.
type snoozeError struct {
	d       time.Duration
	counted bool
}

func (e *snoozeError) Error() string { return fmt.Sprintf("queue: job snoozed for %s", e.d) }

// Snooze, returned by a handler, runs its job again after d without
// counting the attempt (River's JobSnooze, Laravel's release()). Each job
// may snooze Worker.MaxSnoozes times; a snooze beyond that counts as a
// failed attempt and is retried with the worker's backoff.
func Snooze(d time.Duration) error { return &snoozeError{d: max(d, 0), counted: true} }

// SnoozeUncounted is Snooze for limiters: the snooze does not count toward
// Worker.MaxSnoozes. Use it only where something else bounds the snoozes
// (a rate or concurrency limit that frees up), never for a handler's own
// decision.
func SnoozeUncounted(d time.Duration) error { return &snoozeError{d: max(d, 0)} }

// cancelError asks the Worker to cancel the job.
type cancelError struct{ err error }

func (e *cancelError) Error() string {
	if e.err == nil {
		return "queue: job cancelled by its handler"
	}
	return "queue: job cancelled by its handler: " + e.err.Error()
}
func (e *cancelError) Unwrap() error { return e.err }

// Cancel, returned by a handler, ends its job as cancelled: it is not
// retried and not dead-lettered, and its LastError records err (which may
// be nil).
func Cancel(err error) error { return &cancelError{err: err} }

// IsSnooze and IsCancel report whether err is a Snooze or a Cancel result.
func IsSnooze(err error) bool {
	var s *snoozeError
	return errors.As(err, &s)
}

// IsCancel reports whether err is a Cancel result.
func IsCancel(err error) bool {
	var c *cancelError
	return errors.As(err, &c)
}

// Per-type defaults: a job type may set its own options by methods on its
// value, read by NewJob (and so Dispatch) at dispatch; dispatch options
// override them. Backoff is read from the type's zero value by Handle and
// overrides the Worker's policy for that type.

// QueueNamer is a job type that chooses its queue.
type QueueNamer interface{ Queue() string }

// AttemptsLimiter is a job type that sets its total attempts.
type AttemptsLimiter interface{ MaxAttempts() int }

// TimeoutSetter is a job type that bounds each attempt.
type TimeoutSetter interface{ Timeout() time.Duration }

// BackoffSetter is a job type that sets the delay before retry attempt+1
// after its attempt-th attempt failed (attempt counts from 1). It must work
// on the zero value.
type BackoffSetter interface {
	Backoff(attempt int) time.Duration
}

// typeDefaults applies v's per-type options to j.
func typeDefaults(v any, j *Job) {
	if t, ok := v.(QueueNamer); ok {
		j.Queue = t.Queue()
	}
	if t, ok := v.(AttemptsLimiter); ok {
		j.MaxAttempts = t.MaxAttempts()
	}
	if t, ok := v.(TimeoutSetter); ok {
		j.Timeout = t.Timeout()
	}
}

// RetryUntil stops retrying the job after t: an attempt that fails after t
// dead-letters it, whatever attempts remain.
func RetryUntil(t time.Time) Option { return func(j *Job) { j.RetryUntil = t } }
