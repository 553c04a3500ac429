package driver

import (
	"errors"
	"fmt"
	"time"
)

// MaxResultBytes bounds a job's result (queue.SetResult) as encoded, the
// same on every driver: 64 KiB less one byte, what MySQL's BLOB holds.
// Keep large outputs in your own storage and return a reference.
const MaxResultBytes = 65535

// DefaultResultRetention is how long a result is kept after its job
// succeeded when the Worker is not told otherwise (Worker.ResultRetention).
const DefaultResultRetention = 24 * time.Hour

// ErrNoResult reports that a job's result was not there to read: the job
// has not succeeded within the wait, succeeded without a result, its
// result's retention has passed, or the store keeps no results.
var ErrNoResult = errors.New("queue: no result")

// ErrResultTooLarge reports a result beyond MaxResultBytes.
var ErrResultTooLarge = fmt.Errorf("queue: result beyond %d bytes", MaxResultBytes)
