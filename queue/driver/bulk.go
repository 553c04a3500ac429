package driver

import (
	"errors"
	"fmt"
)

// BulkAction is what Controller.ActOn does to each job it selects.
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
	// Controller.Cancel).
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
