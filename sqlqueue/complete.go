package sqlqueue

import (
	"context"
	"errors"
	"fmt"
	"time"

	queue "github.com/meridianjobs/meridian/queue/driver"
)

// Complete counts the attempts of the jobs under starts and records the
// outcomes of outs (see queue.Queue.Complete), in three parts:
//
//   - the start marks and the plain acks (done, nothing pushed, no batch)
//     in one statement or one short transaction per chunk of leases
//     (changeLeases); its failure fails the call as a whole;
//   - every other outcome but a batch member's (retries, dead letters,
//     snoozes, cancels, chain steps with their pushes) in one write
//     transaction, one lease-guarded statement each; should that
//     transaction fail, each of them is tried again in a transaction of
//     its own, so that one refused outcome (its reason text, say) costs
//     the others nothing;
//   - each batch member's outcome in a transaction of its own
//     (completeMember), since batch transactions take their locks in an
//     order of their own.
//
// Buffered run metrics are written with it when due.
func (q *Queue) Complete(ctx context.Context, starts []queue.Lease, outs []queue.Completion) ([]queue.Lease, []error, error) {
	if err := q.use(ctx); err != nil {
		return nil, nil, err
	}
	errs := make([]error, len(outs))
	var acks []queue.Lease
	var ackAt, rest, members []int
	for i, o := range outs {
		switch {
		case o.Batch != "" && (o.Outcome == queue.OutcomeDone || o.Outcome == queue.OutcomeFailed || o.Outcome == queue.OutcomeCancelled):
			members = append(members, i)
		case o.Outcome == queue.OutcomeDone && len(o.Push) == 0:
			acks = append(acks, o.Lease)
			ackAt = append(ackAt, i)
		default:
			rest = append(rest, i)
		}
	}
	var lostStarts []queue.Lease
	if len(starts) > 0 || len(acks) > 0 {
		lost, err := q.changeLeases(ctx, "starting and completing",
			leaseChange{leases: starts, op: leaseStart},
			q.ackChange(acks))
		if err != nil {
			return nil, nil, err
		}
		lostStarts = lost[0]
		if len(lost[1]) > 0 {
			gone := make(map[queue.Lease]bool, len(lost[1]))
			for _, l := range lost[1] {
				gone[l] = true
			}
			for _, i := range ackAt {
				if gone[outs[i].Lease] {
					errs[i] = fmt.Errorf("sqlqueue: acking job %s: %w", outs[i].Lease.JobID, queue.ErrLeaseLost)
				}
			}
		}
		q.countAcked(len(acks) - len(lost[1]))
	}
	if len(rest) > 0 {
		q.completeRest(ctx, outs, rest, errs)
	}
	for _, i := range members {
		o := outs[i]
		errs[i] = q.completeMember(ctx, o.Lease, o.Batch, o.Outcome, o.Reason)
	}
	q.flushMetricsIfDue(ctx)
	return lostStarts, errs, nil
}

// completeRest records the outcomes outs[i] of each i of rest in one write
// transaction, or, should it fail, each in a transaction of its own,
// setting errs[i].
func (q *Queue) completeRest(ctx context.Context, outs []queue.Completion, rest []int, errs []error) {
	for _, i := range rest {
		if err := queue.ValidateBatch(outs[i].Push); err != nil {
			errs[i] = err
		}
	}
	var pushed []queue.Job
	var stored []bool
	err := q.againOnConflict(ctx, func() error {
		pushed, stored = pushed[:0], stored[:0]
		return q.d.writeTx(ctx, q, func(ex execer) error {
			st := stmts(ex)
			for _, i := range rest {
				if errs[i] != nil && !errors.Is(errs[i], errLeaseGone) {
					continue // refused before the transaction
				}
				errs[i] = nil
				s, err := q.completeOne(ctx, st, outs[i])
				if errors.Is(err, errLeaseGone) {
					errs[i] = err
					continue
				}
				if err != nil {
					return err
				}
				pushed, stored = append(pushed, outs[i].Push...), append(stored, s...)
			}
			return nil
		})
	})
	if err != nil {
		// One at a time, each its own transaction.
		pushed, stored = nil, nil
		for _, i := range rest {
			if errs[i] != nil && !errors.Is(errs[i], errLeaseGone) {
				continue
			}
			var s []bool
			errs[i] = q.againOnConflict(ctx, func() error {
				return q.d.writeTx(ctx, q, func(ex execer) error {
					var err error
					s, err = q.completeOne(ctx, stmts(ex), outs[i])
					return err
				})
			})
			if errs[i] == nil {
				pushed, stored = append(pushed, outs[i].Push...), append(stored, s...)
			}
		}
	}
	for _, i := range rest {
		o := outs[i]
		switch {
		case errors.Is(errs[i], errLeaseGone):
			errs[i] = fmt.Errorf("sqlqueue: completing job %s as %s: %w", o.Lease.JobID, o.Outcome, queue.ErrLeaseLost)
		case errs[i] != nil:
			var verr *queue.ValidationError
			if !errors.As(errs[i], &verr) {
				errs[i] = q.wrap(ctx, errs[i], "completing job %s as %s", o.Lease.JobID, o.Outcome)
			}
		case o.Outcome == queue.OutcomeRetried || o.Outcome == queue.OutcomeSnoozed:
			q.wake.at(q.againAt(o.At))
		}
	}
	if len(pushed) > 0 {
		q.wakeFor(pushed, stored)
	}
}

// againAt is when a job released for at runs again: at, or now if at is
// zero or past.
func (q *Queue) againAt(at time.Time) time.Time {
	if now := time.Now(); at.Before(now) {
		return now
	}
	return at
}

// completeOne records the outcome o, not a batch member's, on st, and
// pushes o.Push after it; it returns errLeaseGone, having changed
// nothing, when o's lease is not current, and which pushed jobs were
// stored.
func (q *Queue) completeOne(ctx context.Context, st statements, o queue.Completion) ([]bool, error) {
	nowT := time.Now()
	now := micros(nowT)
	var stmt query
	var args []any
	switch o.Outcome {
	case queue.OutcomeDone, queue.OutcomeFailed, queue.OutcomeCancelled:
		stmt, args, _ = q.finishQuery(o.Outcome, o.Reason, now)
	case queue.OutcomeRetried:
		at := micros(q.againAt(o.At))
		stmt, args = qRetryLeased, []any{now, historyError(o.Reason), at, at, o.Reason, now}
	case queue.OutcomeSnoozed:
		inc := 0
		if o.Counted {
			inc = 1
		}
		at := micros(q.againAt(o.At))
		stmt, args = qSnoozeLeased, []any{inc, at, at, now}
	default:
		return nil, fmt.Errorf("unknown outcome %d", o.Outcome)
	}
	n, err := q.execLeased(ctx, st, stmt, o.Lease, now, args...)
	if err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, errLeaseGone
	}
	if len(o.Push) == 0 {
		return nil, nil
	}
	return q.pushMany(ctx, st, true, o.Push)
}

// errLeaseGone ends a transaction of Complete whose lease was not
// current, rolling it back.
var errLeaseGone = errors.New("lease not current")

// finishQuery is the lease-guarded statement (see execLeased) that ends
// the job under a lease with outcome o at now, and its arguments before
// the lease's: OutcomeDone deletes it (or keeps it as done under
// WithRetention), OutcomeFailed dead-letters it with reason, recorded in
// its attempt history as a retry records it, and OutcomeCancelled cancels it. Any
// other outcome gives false.
func (q *Queue) finishQuery(o queue.Outcome, reason string, now int64) (query, []any, bool) {
	switch o {
	case queue.OutcomeDone:
		stmt, args := q.ackQuery(now)
		return stmt, args, true
	case queue.OutcomeFailed:
		return qDeadLeased, []any{now, historyError(reason), reason, now, now}, true
	case queue.OutcomeCancelled:
		return qCancelLeased, []any{queue.ErrCancelled.Error(), now, now}, true
	}
	return 0, nil, false
}
