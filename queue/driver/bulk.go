package driver

import (
	"context"
	"errors"
	"fmt"
)

// BulkAction is what BulkActor.ActOn does to each job it selects.
type BulkAction string

// The bulk actions and the state each acts on.
const (
	// BulkRetry moves dead letters back to ready, available now, with
	// their attempts reset (as RetryDead). A dead letter whose unique key
	// an active job now holds is skipped.
	BulkRetry BulkAction = "retry"
	// BulkForget deletes dead letters (as ForgetDead).
	BulkForget BulkAction = "forget"
	// BulkCancel cancels ready, scheduled or running jobs (as
	// Canceller.Cancel).
	BulkCancel BulkAction = "cancel"
)

// Valid reports whether a may act on jobs in state s: BulkRetry and
// BulkForget on StateDead, BulkCancel on StateReady, StateScheduled and
// StateRunning.
func (a BulkAction) Valid(s JobState) bool {
	switch a {
	case BulkRetry, BulkForget:
		return s == StateDead
	case BulkCancel:
		return s == StateReady || s == StateScheduled || s == StateRunning
	}
	return false
}

// BulkActor is a Queue that acts on every job a filter selects with one
// set-based statement per chunk of jobs, rather than one call per job, and
// counts them for a confirmation. The dashboard's "all matching" actions
// use it when the driver has it and fall back to one call per job.
type BulkActor interface {
	// ActOn applies a to at most limit jobs that match f, in ListJobs'
	// order, and returns how many it changed. f.State must be a state a
	// is Valid for; f.After, f.Limit and f.Scan are ignored. A payload
	// search (f.Search) examines the jobs a chunk at a time with ListJobs'
	// bounds and goes on until limit jobs changed or none are left. Jobs
	// that leave the state meanwhile are skipped, not errors. On an
	// error, the count says how many changed before it.
	ActOn(ctx context.Context, f JobFilter, a BulkAction, limit int) (int, error)
	// CountJobs counts the jobs that match f, exact up to limit (More set
	// beyond it). With f.Search it counts the matches among the jobs one
	// bounded search examines, and sets More when that bound was reached.
	// f.After, f.Limit and f.Scan are ignored.
	CountJobs(ctx context.Context, f JobFilter, limit int) (Count, error)
}

// ErrBulkState reports a bulk action asked of jobs in a state it does not
// act on (BulkAction.Valid), or with a limit below 1. Nothing changed.
var ErrBulkState = errors.New("queue: bulk action not valid for that state")

// CheckBulk returns an error matching ErrBulkState when a cannot act on
// jobs in state s or limit is below 1. Drivers call it first in ActOn.
func CheckBulk(a BulkAction, s JobState, limit int) error {
	if !a.Valid(s) {
		return fmt.Errorf("queue: bulk %q on %s jobs: %w", a, s, ErrBulkState)
	}
	if limit < 1 {
		return fmt.Errorf("queue: bulk %q with limit %d: %w", a, limit, ErrBulkState)
	}
	return nil
}
