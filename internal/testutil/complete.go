package testutil

import (
	"context"
	"fmt"
	"time"

	"github.com/meridianjobs/meridian/queue/driver"
)

// Complete records the one outcome c through q's Complete and returns its
// own answer, or the call's error: what a test that settles one lease by
// hand needs.
func Complete(ctx context.Context, q driver.Queue, c driver.Completion) error {
	_, errs, err := q.Complete(ctx, nil, []driver.Completion{c})
	if err != nil {
		return err
	}
	if len(errs) != 1 {
		return fmt.Errorf("testutil: Complete answered %d outcomes for 1", len(errs))
	}
	return errs[0]
}

// Ack records that the job under l is done.
func Ack(ctx context.Context, q driver.Queue, l driver.Lease) error {
	return Complete(ctx, q, driver.Completion{Lease: l, Outcome: driver.OutcomeDone})
}

// Nack releases the job under l for another attempt no earlier than
// retryAt, with reason as its LastError.
func Nack(ctx context.Context, q driver.Queue, l driver.Lease, retryAt time.Time, reason string) error {
	return Complete(ctx, q, driver.Completion{Lease: l, Outcome: driver.OutcomeRetried, At: retryAt, Reason: reason})
}

// Fail dead-letters the job under l with reason.
func Fail(ctx context.Context, q driver.Queue, l driver.Lease, reason string) error {
	return Complete(ctx, q, driver.Completion{Lease: l, Outcome: driver.OutcomeFailed, Reason: reason})
}

// Extend sets the expiry of l alone to now plus d, through ExtendMany,
// and returns an error matching driver.ErrLeaseLost when l was not
// current.
func Extend(ctx context.Context, q driver.Queue, l driver.Lease, d time.Duration) error {
	lost, err := q.ExtendMany(ctx, []driver.Lease{l}, d)
	if err == nil && len(lost) > 0 {
		err = fmt.Errorf("testutil: extending the lease of job %s: %w", l.JobID, driver.ErrLeaseLost)
	}
	return err
}
