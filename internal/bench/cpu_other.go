//go:build !unix

package bench

import "time"

// ProcessCPU reports false: this platform's CPU time is not read.
func ProcessCPU() (time.Duration, bool) { return 0, false }
