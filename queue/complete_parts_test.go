package queue

import (
	"context"
	"errors"
	"time"

	"github.com/meridianjobs/meridian/queue/driver"
)

// completeByParts is Queue.Complete for a test stub that records outcomes
// through per-outcome calls of its own (Ack, Nack, Fail, Snooze, AckPush,
// FailPush, FinishMember), starts through Start, and plain acks through
// AckMany, or starts and acks together through StartAck, where it has
// them: so a stub's test reads which call each outcome became.
func completeByParts(ctx context.Context, q any, starts []driver.Lease, outs []driver.Completion) ([]driver.Lease, []error, error) {
	errs := make([]error, len(outs))
	var acks []driver.Lease
	var ackAt []int
	for i, o := range outs {
		if o.Outcome == driver.OutcomeDone && o.Batch == "" && len(o.Push) == 0 {
			acks = append(acks, o.Lease)
			ackAt = append(ackAt, i)
		}
	}
	var lostStarts, lostAcks []driver.Lease
	acked := false
	type startAcker interface {
		StartAck(ctx context.Context, starts, acks []driver.Lease) ([]driver.Lease, []driver.Lease, error)
	}
	type starter interface {
		Start(ctx context.Context, leases []driver.Lease) ([]driver.Lease, error)
	}
	type batchAcker interface {
		AckMany(ctx context.Context, leases []driver.Lease) ([]driver.Lease, error)
	}
	if sa, ok := q.(startAcker); ok && len(starts) > 0 && len(acks) > 0 {
		var err error
		if lostStarts, lostAcks, err = sa.StartAck(ctx, starts, acks); err != nil {
			return nil, nil, err
		}
		acked = true
	} else if len(starts) > 0 {
		// A stub without Start counts every start.
		if st, ok := q.(starter); ok {
			var err error
			if lostStarts, err = st.Start(ctx, starts); err != nil {
				return nil, nil, err
			}
		}
	}
	if !acked && len(acks) > 0 {
		if ba, ok := q.(batchAcker); ok {
			var err error
			if lostAcks, err = ba.AckMany(ctx, acks); err != nil {
				return lostStarts, nil, err
			}
			acked = true
		}
	}
	if acked {
		lost := make(map[driver.Lease]bool, len(lostAcks))
		for _, l := range lostAcks {
			lost[l] = true
		}
		for _, i := range ackAt {
			if lost[outs[i].Lease] {
				errs[i] = ErrLeaseLost
			}
		}
	}
	for i, o := range outs {
		if acked && o.Outcome == driver.OutcomeDone && o.Batch == "" && len(o.Push) == 0 {
			continue
		}
		errs[i] = completeOne(ctx, q, o)
	}
	return lostStarts, errs, nil
}

// completeOne records o through the stub q's per-outcome call.
func completeOne(ctx context.Context, q any, o driver.Completion) error {
	type settler interface {
		Ack(ctx context.Context, l driver.Lease) error
		Nack(ctx context.Context, l driver.Lease, retryAt time.Time, reason string) error
		Fail(ctx context.Context, l driver.Lease, reason string) error
	}
	type chainer interface {
		AckPush(ctx context.Context, l driver.Lease, jobs []Job) error
		FailPush(ctx context.Context, l driver.Lease, reason string, jobs []Job) error
	}
	type snoozer interface {
		Snooze(ctx context.Context, l driver.Lease, at time.Time, counted bool) error
	}
	type member interface {
		FinishMember(ctx context.Context, l driver.Lease, batch string, o driver.Outcome, reason string) error
	}
	s, ok := q.(settler)
	if !ok {
		return errors.New("stub: no Ack, Nack and Fail")
	}
	if m, ok := q.(member); ok && o.Batch != "" {
		return m.FinishMember(ctx, o.Lease, o.Batch, o.Outcome, o.Reason)
	}
	c, isChainer := q.(chainer)
	switch o.Outcome {
	case driver.OutcomeDone:
		if isChainer && len(o.Push) > 0 {
			return c.AckPush(ctx, o.Lease, o.Push)
		}
		return s.Ack(ctx, o.Lease)
	case driver.OutcomeFailed, driver.OutcomeCancelled:
		if isChainer && len(o.Push) > 0 {
			return c.FailPush(ctx, o.Lease, o.Reason, o.Push)
		}
		return s.Fail(ctx, o.Lease, o.Reason)
	case driver.OutcomeSnoozed:
		if sn, ok := q.(snoozer); ok {
			return sn.Snooze(ctx, o.Lease, o.At, o.Counted)
		}
	}
	return s.Nack(ctx, o.Lease, o.At, o.Reason)
}

func (s *stubQueue) Complete(ctx context.Context, starts []driver.Lease, outs []driver.Completion) ([]driver.Lease, []error, error) {
	return completeByParts(ctx, s, starts, outs)
}

func (s stubAcker) Complete(ctx context.Context, starts []driver.Lease, outs []driver.Completion) ([]driver.Lease, []error, error) {
	return completeByParts(ctx, s, starts, outs)
}

func (s inspectingAcker) Complete(ctx context.Context, starts []driver.Lease, outs []driver.Completion) ([]driver.Lease, []error, error) {
	return completeByParts(ctx, s, starts, outs)
}

func (s *startingStub) Complete(ctx context.Context, starts []driver.Lease, outs []driver.Completion) ([]driver.Lease, []error, error) {
	return completeByParts(ctx, s, starts, outs)
}

func (s *stubStarter) Complete(ctx context.Context, starts []driver.Lease, outs []driver.Completion) ([]driver.Lease, []error, error) {
	return completeByParts(ctx, s, starts, outs)
}

func (s *stubStartAcker) Complete(ctx context.Context, starts []driver.Lease, outs []driver.Completion) ([]driver.Lease, []error, error) {
	return completeByParts(ctx, s, starts, outs)
}
