package driver

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// Chainer is a Queue that records a job's outcome and pushes the jobs that
// follow it in one step, so a chain survives a crash between its steps.
// The Worker uses it for chain steps; without it the Worker pushes the next
// step and then acks, and a crash between the two may run the next step
// twice.
type Chainer interface {
	// AckPush acks the job under l and pushes jobs, with Push's rules, in
	// one transaction: both happen or neither. A job of jobs whose ID or
	// unique key is held by an active job is skipped, not an error. If l
	// is not current it returns ErrLeaseLost and pushes nothing.
	AckPush(ctx context.Context, l Lease, jobs []Job) error
	// FailPush dead-letters the job under l with reason, as Fail does,
	// and pushes jobs in the same transaction, with AckPush's rules.
	FailPush(ctx context.Context, l Lease, reason string, jobs []Job) error
}

// Leaser is a Queue that can hold named leases: at most one holder per name
// at a time, until the lease's expiry. It is the store side of leader
// election (Leader) and of the maintenance leader of SQL drivers. Leases
// live in the same store as the jobs, so every process that shares the
// store sees the same holder.
//
// Expiries are computed from the calling process's clock: clocks of the
// processes that share a store must agree to well within a TTL.
type Leaser interface {
	// AcquireLease takes the lease name for holder until now plus ttl when
	// it is free or expired, or renews it when holder already holds it. It
	// reports whether holder holds the lease after the call.
	AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (bool, error)
	// AcquireLeaseEpoch is AcquireLease that also returns the lease's
	// epoch, the fencing token of its terms (see Fence), when holder holds
	// the lease after the call (0 when not). The epoch of a name starts
	// above 0 and grows each time the lease passes to a holder that did
	// not hold it live: from another holder, or after it expired or was
	// released. A renewal of a live lease by its holder keeps it. Epochs
	// never go down, and a store that checks fenced writes (see
	// WithFence) refuses those whose epoch is not the lease's.
	AcquireLeaseEpoch(ctx context.Context, name, holder string, ttl time.Duration) (epoch int64, held bool, err error)
	// ReleaseLease gives up the lease name if holder holds it, so another
	// holder may take it at once. Releasing a lease one does not hold is
	// not an error.
	ReleaseLease(ctx context.Context, name, holder string) error
}

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

// PeriodicStore is a Queue that records periodic jobs' ticks, so each tick
// is enqueued once however many processes schedule it.
type PeriodicStore interface {
	// RegisterPeriodic creates the record p.Name with p's fields when it
	// does not exist, and otherwise updates its Schedule and NextTick,
	// keeping its LastTick. It returns the record's LastTick.
	RegisterPeriodic(ctx context.Context, p PeriodicInfo) (last time.Time, err error)
	// ClaimTick records the tick p.LastTick of periodic p.Name and pushes
	// j, both or neither, if the record's LastTick is before p.LastTick;
	// it then sets NextTick and LastJobID (j's ID, or "" when j was a
	// duplicate and skipped). It reports false, changing nothing, when
	// the tick was already claimed. The record must exist.
	ClaimTick(ctx context.Context, p PeriodicInfo, j Job) (claimed bool, err error)
	// Periodics lists the records, sorted by name.
	Periodics(ctx context.Context) ([]PeriodicInfo, error)
}

// LeaseDefaulter is a Queue that has a configured lease length (sqlqueue's
// WithVisibilityTimeout). A Worker with no Lease setting reserves for that
// long.
type LeaseDefaulter interface {
	DefaultLease() time.Duration
}

// OldestReadyReader is an Inspector that reports, per queue, how long its
// oldest ready job has been waiting: the time since the earliest
// AvailableAt (or CreatedAt when AvailableAt is zero) among the queue's
// ready jobs. Metrics and alerts use it for "oldest ready job age"; without
// it they fall back to the first page of ListJobs per queue, which is
// exact for queues of jobs dispatched without delay.
type OldestReadyReader interface {
	// OldestReady returns, for each queue with ready jobs, the earliest
	// time one of its ready jobs became available. Queues without ready
	// jobs are absent. It is one bounded read of the store.
	OldestReady(ctx context.Context) (map[string]time.Time, error)
}
