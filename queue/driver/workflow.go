package driver

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// MaxLeaseNameBytes bounds a lease's name (NewLeader, Leaser), the same on
// every driver.
const MaxLeaseNameBytes = 50

// ValidateLeaseName returns an error matching ErrConfig for a lease name
// that is empty, longer than MaxLeaseNameBytes, not valid UTF-8, or that
// has a NUL byte or ends in a space. Names are compared byte for byte on
// every driver; MariaDB ignores trailing spaces when it compares strings,
// so "lead" and "lead " would name the same lease there and are refused
// everywhere instead.
func ValidateLeaseName(name string) error {
	switch {
	case name == "" || len(name) > MaxLeaseNameBytes:
		return fmt.Errorf("%w: lease name %q: want 1 to %d bytes", ErrConfig, name, MaxLeaseNameBytes)
	case !utf8.ValidString(name) || strings.IndexByte(name, 0) >= 0:
		return fmt.Errorf("%w: lease name %q: want UTF-8 without NUL", ErrConfig, name)
	case strings.HasSuffix(name, " "):
		return fmt.Errorf("%w: lease name %q ends in a space", ErrConfig, name)
	}
	return nil
}

// PeriodicInfo is the stored record of a periodic job.
type PeriodicInfo struct {
	Name     string
	Schedule string // the schedule's String
	// LastTick is the latest tick handled (enqueued, or skipped as a
	// duplicate); ticks at or before it are never enqueued again.
	LastTick  time.Time
	NextTick  time.Time // the next tick, as the last process to touch the record computed it
	LastJobID string    // the job of the last tick, "" if none was stored
}
