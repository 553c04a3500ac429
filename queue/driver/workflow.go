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

// The Meta keys of periodic jobs' runs (queue.Periodic): the periodic
// job's name, on every run, and the tick's time (RFC 3339, UTC) on the
// runs of ticks, not on those started by hand (RunPeriodic).
const (
	MetaPeriodic     = "meridian.periodic"
	MetaPeriodicTick = "meridian.periodic_tick"
)

// PeriodicInfo is the stored record of a periodic job.
type PeriodicInfo struct {
	Name     string
	Schedule string // the schedule's String
	// LastTick is the latest tick handled (enqueued, or skipped as a
	// duplicate); ticks at or before it are never enqueued again.
	LastTick  time.Time
	NextTick  time.Time // the next tick, as the last process to touch the record computed it
	LastJobID string    // the job of the last tick, "" if none was stored
	// Paused stops the ticks: ClaimTick claims none while it is set, and
	// the ticks that fall meanwhile are skipped, not run later. It is set
	// by PausePeriodic only; RegisterPeriodic keeps it.
	Paused bool
	// Seen is when a worker last registered the record or claimed one of
	// its ticks: a NextTick long past with Seen before it means no worker
	// runs the schedule. Stores set it; it is ignored on input.
	Seen time.Time
	// Template is the job a tick enqueues, as the last worker to register
	// the record built it (an encoding of the queue package's choosing),
	// so that a tool without the job's Go type can run the schedule now.
	// RegisterPeriodic replaces it; empty means unknown (a record written
	// by an older release).
	Template []byte
}
