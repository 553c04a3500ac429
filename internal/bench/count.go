package bench

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/meridianjobs/meridian/queue"
)

// Calls counts the driver calls of one mode and the jobs they moved: the
// evidence for batch sizes (how many jobs one Reserve or AckMany carries)
// that a throughput figure alone does not show.
type Calls struct {
	Reserve, Reserved atomic.Int64 // calls; jobs returned
	EmptyReserve      atomic.Int64 // calls that returned no job
	AckMany, Acked    atomic.Int64 // calls; leases presented
	Ack               atomic.Int64
	Nack              atomic.Int64
	Push              atomic.Int64
	PushMany, Pushed  atomic.Int64 // calls; jobs presented
	Wait              atomic.Int64
	Extend            atomic.Int64
	ReserveNanos      atomic.Int64 // time spent in Reserve
	AckNanos          atomic.Int64 // time spent in AckMany and Ack
	// Unstarted, Prefetched and UnstartedNanos are ReserveUnstarted's
	// calls, jobs and time; Start, Started and StartNanos Start's calls,
	// leases and time (queue.Starter).
	Unstarted, Prefetched atomic.Int64
	UnstartedNanos        atomic.Int64
	Start, Started        atomic.Int64
	StartNanos            atomic.Int64
	// StartAck, StartAckStarts, StartAckAcks and StartAckNanos are
	// StartAck's calls, the leases of each list and its time
	// (queue.StartAcker).
	StartAck, StartAckStarts, StartAckAcks atomic.Int64
	StartAckNanos                          atomic.Int64
	// Complete, CompleteStarts, CompleteOuts and CompleteNanos are
	// Complete's calls, the leases of each list and its time.
	Complete, CompleteStarts, CompleteOuts atomic.Int64
	CompleteNanos                          atomic.Int64
}

// String summarises the calls on one line, leaving out those never made.
func (c *Calls) String() string {
	var parts []string
	per := func(name string, calls, jobs, nanos int64) {
		if calls == 0 {
			return
		}
		s := fmt.Sprintf("%s %d calls x %.1f jobs", name, calls, float64(jobs)/float64(calls))
		if nanos > 0 {
			s += fmt.Sprintf(" (%.2f ms each)", float64(nanos)/float64(calls)/1e6)
		}
		parts = append(parts, s)
	}
	per("Reserve", c.Reserve.Load(), c.Reserved.Load(), c.ReserveNanos.Load())
	if n := c.EmptyReserve.Load(); n > 0 {
		parts = append(parts, fmt.Sprintf("%d of them empty", n))
	}
	per("ReserveUnstarted", c.Unstarted.Load(), c.Prefetched.Load(), c.UnstartedNanos.Load())
	per("Start", c.Start.Load(), c.Started.Load(), c.StartNanos.Load())
	per("AckMany", c.AckMany.Load(), c.Acked.Load(), c.AckNanos.Load())
	if n := c.StartAck.Load(); n > 0 {
		parts = append(parts, fmt.Sprintf("StartAck %d calls x %.1f starts + %.1f acks (%.2f ms each)", n,
			float64(c.StartAckStarts.Load())/float64(n), float64(c.StartAckAcks.Load())/float64(n), float64(c.StartAckNanos.Load())/float64(n)/1e6))
	}
	if n := c.Complete.Load(); n > 0 {
		parts = append(parts, fmt.Sprintf("Complete %d calls x %.1f starts + %.1f outcomes (%.2f ms each)", n,
			float64(c.CompleteStarts.Load())/float64(n), float64(c.CompleteOuts.Load())/float64(n), float64(c.CompleteNanos.Load())/float64(n)/1e6))
	}
	per("PushMany", c.PushMany.Load(), c.Pushed.Load(), 0)
	for _, v := range []struct {
		name string
		n    int64
	}{{"Ack", c.Ack.Load()}, {"Nack", c.Nack.Load()}, {"Push", c.Push.Load()}, {"Wait", c.Wait.Load()}, {"Extend", c.Extend.Load()}} {
		if v.n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", v.name, v.n))
		}
	}
	return strings.Join(parts, "; ")
}

// counted wraps a Queue to count its calls. It keeps the optional
// abilities the Worker and DispatchMany look for and behaves as the Worker
// does when the wrapped queue lacks one: Wait sleeps for max, AckMany acks
// one by one, Heartbeat and ObserveRun do nothing, DefaultLease is zero.
type counted struct {
	queue.Queue
	c *Calls
}

// unwrap returns the queue a counted wraps, or q itself.
func unwrap(q queue.Queue) queue.Queue {
	switch c := q.(type) {
	case *counted:
		return c.Queue
	case *countedStarter:
		return c.Queue
	case *countedStartAcker:
		return c.Queue
	}
	return q
}

// count wraps q; the Calls it returns fill as the queue is used. A
// queue.Starter stays one (countedStarter), so the Worker prefetches as it
// would on q.
func count(q queue.Queue) (queue.Queue, *Calls) {
	c := &Calls{}
	cq := &counted{Queue: q, c: c}
	if s, ok := q.(queue.StartAcker); ok {
		return &countedStartAcker{countedStarter{counted: cq, s: s}, s}, c
	}
	if s, ok := q.(queue.Starter); ok {
		return &countedStarter{counted: cq, s: s}, c
	}
	return cq, c
}

// countedStarter is a counted over a queue.Starter.
type countedStarter struct {
	*counted
	s queue.Starter
}

func (q *countedStarter) ReserveUnstarted(ctx context.Context, queues []string, max int, lease time.Duration) ([]queue.Job, error) {
	start := time.Now()
	jobs, err := q.s.ReserveUnstarted(ctx, queues, max, lease)
	q.c.UnstartedNanos.Add(int64(time.Since(start)))
	q.c.Unstarted.Add(1)
	q.c.Prefetched.Add(int64(len(jobs)))
	return jobs, err
}

func (q *countedStarter) Start(ctx context.Context, leases []queue.Lease) ([]queue.Lease, error) {
	start := time.Now()
	lost, err := q.s.Start(ctx, leases)
	q.c.StartNanos.Add(int64(time.Since(start)))
	q.c.Start.Add(1)
	q.c.Started.Add(int64(len(leases)))
	return lost, err
}

// countedStartAcker is a countedStarter over a queue.StartAcker.
type countedStartAcker struct {
	countedStarter
	sa queue.StartAcker
}

func (q *countedStartAcker) StartAck(ctx context.Context, starts, acks []queue.Lease) ([]queue.Lease, []queue.Lease, error) {
	start := time.Now()
	lostStarts, lostAcks, err := q.sa.StartAck(ctx, starts, acks)
	q.c.StartAckNanos.Add(int64(time.Since(start)))
	q.c.StartAck.Add(1)
	q.c.StartAckStarts.Add(int64(len(starts)))
	q.c.StartAckAcks.Add(int64(len(acks)))
	return lostStarts, lostAcks, err
}

func (q *counted) Reserve(ctx context.Context, queues []string, max int, lease time.Duration) ([]queue.Job, error) {
	start := time.Now()
	jobs, err := q.Queue.Reserve(ctx, queues, max, lease)
	q.c.ReserveNanos.Add(int64(time.Since(start)))
	q.c.Reserve.Add(1)
	q.c.Reserved.Add(int64(len(jobs)))
	if len(jobs) == 0 {
		q.c.EmptyReserve.Add(1)
	}
	return jobs, err
}

func (q *counted) Ack(ctx context.Context, l queue.Lease) error {
	start := time.Now()
	err := q.Queue.Ack(ctx, l)
	q.c.AckNanos.Add(int64(time.Since(start)))
	q.c.Ack.Add(1)
	return err
}

func (q *counted) Complete(ctx context.Context, starts []queue.Lease, outs []queue.Completion) ([]queue.Lease, []error, error) {
	start := time.Now()
	lost, errs, err := q.Queue.Complete(ctx, starts, outs)
	q.c.CompleteNanos.Add(int64(time.Since(start)))
	q.c.Complete.Add(1)
	q.c.CompleteStarts.Add(int64(len(starts)))
	q.c.CompleteOuts.Add(int64(len(outs)))
	return lost, errs, err
}

func (q *counted) Nack(ctx context.Context, l queue.Lease, retryAt time.Time, reason string) error {
	q.c.Nack.Add(1)
	return q.Queue.Nack(ctx, l, retryAt, reason)
}

func (q *counted) AckMany(ctx context.Context, leases []queue.Lease) ([]queue.Lease, error) {
	ba, ok := q.Queue.(queue.BatchAcker)
	if !ok {
		var lost []queue.Lease
		for _, l := range leases {
			if err := q.Ack(ctx, l); err != nil {
				lost = append(lost, l)
			}
		}
		return lost, nil
	}
	start := time.Now()
	lost, err := ba.AckMany(ctx, leases)
	q.c.AckNanos.Add(int64(time.Since(start)))
	q.c.AckMany.Add(1)
	q.c.Acked.Add(int64(len(leases)))
	return lost, err
}

func (q *counted) Push(ctx context.Context, j queue.Job) error {
	q.c.Push.Add(1)
	return q.Queue.Push(ctx, j)
}

func (q *counted) PushMany(ctx context.Context, jobs []queue.Job) ([]bool, error) {
	bp, ok := q.Queue.(queue.BatchPusher)
	if !ok {
		stored := make([]bool, len(jobs))
		for i, j := range jobs {
			if err := q.Push(ctx, j); err != nil {
				return nil, err
			}
			stored[i] = true
		}
		return stored, nil
	}
	q.c.PushMany.Add(1)
	q.c.Pushed.Add(int64(len(jobs)))
	return bp.PushMany(ctx, jobs)
}

func (q *counted) Extend(ctx context.Context, l queue.Lease, d time.Duration) error {
	q.c.Extend.Add(1)
	return q.Queue.Extend(ctx, l, d)
}

func (q *counted) Wait(ctx context.Context, queues []string, max time.Duration) error {
	q.c.Wait.Add(1)
	if w, ok := q.Queue.(queue.Waiter); ok {
		return w.Wait(ctx, queues, max)
	}
	if !sleepCtx(ctx, max) {
		return ctx.Err()
	}
	return nil
}

func (q *counted) ObserveRun(r queue.RunRecord) {
	if o, ok := q.Queue.(queue.RunObserver); ok {
		o.ObserveRun(r)
	}
}

func (q *counted) DefaultLease() time.Duration {
	if ld, ok := q.Queue.(queue.LeaseDefaulter); ok {
		return ld.DefaultLease()
	}
	return 0
}

func (q *counted) Heartbeat(ctx context.Context, w queue.WorkerInfo) error {
	if r, ok := q.Queue.(queue.WorkerRegistry); ok {
		return r.Heartbeat(ctx, w)
	}
	return nil
}

func (q *counted) Deregister(ctx context.Context, id string) error {
	if r, ok := q.Queue.(queue.WorkerRegistry); ok {
		return r.Deregister(ctx, id)
	}
	return nil
}

func (q *counted) Workers(ctx context.Context) ([]queue.WorkerInfo, error) {
	if r, ok := q.Queue.(queue.WorkerRegistry); ok {
		return r.Workers(ctx)
	}
	return nil, nil
}

var (
	_ queue.BatchPusher    = (*counted)(nil)
	_ queue.BatchAcker     = (*counted)(nil)
	_ queue.Waiter         = (*counted)(nil)
	_ queue.RunObserver    = (*counted)(nil)
	_ queue.LeaseDefaulter = (*counted)(nil)
	_ queue.WorkerRegistry = (*counted)(nil)
	_ queue.Starter        = (*countedStarter)(nil)
	_ queue.StartAcker     = (*countedStartAcker)(nil)
)
