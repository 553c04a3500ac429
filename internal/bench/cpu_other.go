//go:build !unix

package bench

import "time"

// processCPU returns false: this platform's CPU time is not read.
func processCPU() (time.Duration, bool) { return 0, false }
