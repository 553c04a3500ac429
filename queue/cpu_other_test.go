//go:build !unix

package queue_test

import "time"

// processCPU reports false: this platform's CPU time is not read.
func processCPU() (time.Duration, bool) { return 0, false }
