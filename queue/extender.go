package queue

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/meridianjobs/meridian/queue/driver"
)

// maxExtendBatch bounds one ExtendMany call.
const maxExtendBatch = 1000

// extender is the part of a run that keeps its leases alive: every quarter
// of a lease's usable part (the lease minus the margin) it extends the held
// leases that have less than half of it left before their deadline (the
// stored expiry minus the margin), in batches of ExtendMany, and cancels
// the handler of a lease the queue no longer honours: with ErrCancelled
// when the job was cancelled (it asks the store's Controller, since a cancel ends the lease at once and the extender often
// learns of it before the cancel watcher's next poll), with ErrLeaseLost
// otherwise.
//
// Its store calls have the earliest deadline of the leases they extend,
// and they run apart from its timer: at each lease's deadline the lease
// counts as lost and its handler is cancelled with ErrLeaseLost, whatever
// a call is doing (a frozen connection, a lock wait), so a handler stops
// a margin before another process can be given its job.
type extender struct {
	q         Queue
	canceller driver.Controller // nil: the store cannot cancel running jobs
	lease     time.Duration
	ctx       context.Context
	held      *heldLeases // its margin is the run's
	halt      *halt
	log       *slog.Logger
	fails     streak
}

// run extends leases, and ends those past their deadline, until done is
// closed.
func (x *extender) run(done <-chan struct{}) {
	x.fails = streak{log: x.log, doing: "extending leases", level: slog.LevelWarn}
	every := max((x.lease-x.held.margin)/4, 5*time.Millisecond)
	tick := time.NewTicker(every)
	defer tick.Stop()
	// expiry fires at the earliest deadline of the held leases, or after
	// every at the latest: a lease added meanwhile has a deadline at least
	// half its usable part ahead.
	expiry := time.NewTimer(every)
	defer expiry.Stop()
	var inflight chan struct{} // closed when the round under way ends; nil if none
	for {
		select {
		case <-done:
			if inflight != nil {
				<-inflight // its calls have deadlines
			}
			return
		case <-tick.C:
			if inflight == nil {
				inflight = make(chan struct{})
				go func(now time.Time, end chan<- struct{}) {
					defer close(end)
					x.round(now)
				}(time.Now(), inflight)
			}
			continue
		case <-inflight:
			inflight = nil
			continue
		case <-expiry.C:
		}
		n, next := x.held.expire(time.Now())
		if n > 0 {
			x.log.Warn("queue: leases not renewed by their expiry minus the margin; cancelling their handlers",
				"leases", n, "margin", x.held.margin)
		}
		wait := every
		if !next.IsZero() {
			wait = min(wait, time.Until(next))
		}
		expiry.Reset(max(wait, 0))
	}
}

// round extends the leases due at now. A failed call leaves them to the
// next round, or to their deadline.
func (x *extender) round(now time.Time) {
	due, deadline := x.held.dueBy(now, x.lease)
	if len(due) == 0 {
		return
	}
	ctx, cancel := context.WithDeadline(x.ctx, deadline)
	defer cancel()
	for start := 0; start < len(due); start += maxExtendBatch {
		x.extendMany(ctx, due[start:min(start+maxExtendBatch, len(due))], now)
	}
}

// learnCancels asks the store which jobs were cancelled while running
// since the oldest lease the run holds could have been renewed, and
// cancels their handlers with ErrCancelled, before leases found lost
// cancel theirs with ErrLeaseLost: a cancelled job's handler sees the
// cancel as its cause whichever part of the run learns of it first. On
// an error the leases are taken as lost.
func (x *extender) learnCancels(ctx context.Context, now time.Time) {
	if x.canceller == nil {
		return
	}
	leases, err := x.canceller.CancelledSince(ctx, now.Add(-x.lease-cancelSkew))
	if err != nil {
		return
	}
	x.held.cancelled(leases)
}

// extendMany extends leases in one call.
func (x *extender) extendMany(ctx context.Context, leases []driver.Lease, now time.Time) {
	lost, err := x.q.ExtendMany(ctx, leases, x.lease)
	if err != nil {
		x.failed(err, "jobs", len(leases))
		return
	}
	x.fails.ok()
	if len(lost) > 0 {
		x.learnCancels(ctx, now)
	}
	gone := make(map[driver.Lease]bool, len(lost))
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
func (x *extender) extended(l driver.Lease, now time.Time, err error) {
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
