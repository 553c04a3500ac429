package driver

import (
	"errors"
)

// StateCancelled is the state of a job cancelled before it finished. It is
// kept, like a done job, for the driver's retention of finished jobs, and
// never runs again.
const StateCancelled JobState = "cancelled"

// ErrFinished reports a cancel of a job that has already finished (done,
// dead or cancelled).
var ErrFinished = errors.New("queue: job already finished")

// ErrCancelled is the cause of a handler's context cancelled because its
// job was cancelled (see Controller.Cancel), and the error recorded for it.
var ErrCancelled = errors.New("queue: job cancelled")
