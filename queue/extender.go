package queue

import (
	"context"
	"errors"
	"log/slog"
	"time"
)

// maxExtendBatch bounds one ExtendMany call.
const maxExtendBatch = 1000

// extender is the part of a run that keeps its leases alive: every quarter
// lease it extends the held leases that have less than half left, through
// the queue's BatchExtender when it has one, and cancels the handler of a
// lease the queue no longer honours: with ErrCancelled when the job was
// cancelled (it asks the Canceller, since a cancel ends the lease at once
// and the extender often learns of it before the cancel watcher's next
// poll), with ErrLeaseLost otherwise.
type extender struct {
	q         Queue
	batch     BatchExtender // nil: one Extend per lease
	canceller Canceller     // nil: the store cannot cancel running jobs
	lease     time.Duration
	ctx       context.Context
	held      *heldLeases
	halt      *halt
	log       *slog.Logger
	fails     streak
}

// run extends leases until done is closed.
func (x *extender) run(done <-chan struct{}) {
	x.fails = streak{log: x.log, doing: "extending leases", level: slog.LevelWarn}
	tick := time.NewTicker(max(x.lease/4, 5*time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-done:
			return
		case <-tick.C:
		}
		x.round(time.Now())
	}
}

// round extends the leases due at now. A failed call leaves them to the
// next round.
func (x *extender) round(now time.Time) {
	due := x.held.due(now, x.lease)
	if x.batch != nil {
		for start := 0; start < len(due); start += maxExtendBatch {
			x.extendMany(due[start:min(start+maxExtendBatch, len(due))], now)
		}
		return
	}
	asked := false
	for _, l := range due {
		err := x.q.Extend(x.ctx, l, x.lease)
		if errors.Is(err, ErrLeaseLost) && !asked {
			asked = true
			x.learnCancels(now)
		}
		x.extended(l, now, err)
	}
}

// learnCancels asks the store which jobs were cancelled while running
// since the oldest lease the run holds could have been renewed, and
// cancels their handlers with ErrCancelled, before leases found lost
// cancel theirs with ErrLeaseLost: a cancelled job's handler sees the
// cancel as its cause whichever part of the run learns of it first. On
// an error the leases are taken as lost.
func (x *extender) learnCancels(now time.Time) {
	if x.canceller == nil {
		return
	}
	leases, err := x.canceller.CancelledSince(x.ctx, now.Add(-x.lease-cancelSkew))
	if err != nil {
		return
	}
	x.held.cancelled(leases)
}

// extendMany extends leases in one call.
func (x *extender) extendMany(leases []Lease, now time.Time) {
	lost, err := x.batch.ExtendMany(x.ctx, leases, x.lease)
	if err != nil {
		x.failed(err, "jobs", len(leases))
		return
	}
	x.fails.ok()
	if len(lost) > 0 {
		x.learnCancels(now)
	}
	gone := make(map[Lease]bool, len(lost))
	for _, l := range lost {
		gone[l] = true
	}
	for _, l := range leases {
		if gone[l] {
			x.extended(l, now, ErrLeaseLost)
		} else {
			x.extended(l, now, nil)
		}
	}
}

// extended records the outcome of extending l at now.
func (x *extender) extended(l Lease, now time.Time, err error) {
	if x.held.extended(l, now, x.lease, err) {
		x.log.Warn("queue: lease lost while the job ran; cancelling its handler", "job", l.JobID)
		return
	}
	if err != nil {
		x.failed(err, "job", l.JobID)
		return
	}
	x.fails.ok()
}

func (x *extender) failed(err error, args ...any) {
	if x.ctx.Err() != nil || errors.Is(err, ErrLeaseLost) {
		return
	}
	if x.halt.check("extending leases", err) {
		return
	}
	x.fails.failed(err, args...)
}
