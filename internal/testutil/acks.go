package testutil

import (
	"context"
	"errors"

	"github.com/meridianjobs/meridian/queue/driver"
)

// StartAck counts an attempt for the job under each lease of starts and
// acks the job under each lease of acks in one Complete, and returns the
// leases of each list that were not current: what the removed batch calls
// Start, AckMany and StartAck answered, for tests that check it.
func StartAck(ctx context.Context, q driver.Queue, starts, acks []driver.Lease) (lostStarts, lostAcks []driver.Lease, err error) {
	outs := make([]driver.Completion, len(acks))
	for i, l := range acks {
		outs[i] = driver.Completion{Lease: l, Outcome: driver.OutcomeDone}
	}
	lostStarts, errs, err := q.Complete(ctx, starts, outs)
	if err != nil {
		return nil, nil, err
	}
	for i, e := range errs {
		switch {
		case e == nil:
		case errors.Is(e, driver.ErrLeaseLost):
			lostAcks = append(lostAcks, acks[i])
		default:
			return nil, nil, e
		}
	}
	return lostStarts, lostAcks, nil
}

// AckMany acks the job under each lease of leases in one Complete and
// returns the leases that were not current.
func AckMany(ctx context.Context, q driver.Queue, leases []driver.Lease) ([]driver.Lease, error) {
	_, lost, err := StartAck(ctx, q, nil, leases)
	return lost, err
}
