package bench

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// Calls counts the driver calls of one mode and the jobs they moved: the
// evidence for batch sizes (how many jobs one Reserve or Complete carries)
// that a throughput figure alone does not show.
type Calls struct {
	Reserve, Reserved atomic.Int64 // calls; jobs returned
	EmptyReserve      atomic.Int64 // calls that returned no job
	Push              atomic.Int64
	PushMany, Pushed  atomic.Int64 // calls; jobs presented
	Wait              atomic.Int64
	Extend, Extended  atomic.Int64 // ExtendMany's calls; leases presented
	ReserveNanos      atomic.Int64 // time spent in Reserve
	// Unstarted, Prefetched and UnstartedNanos are ReserveUnstarted's
	// calls, jobs and time.
	Unstarted, Prefetched atomic.Int64
	UnstartedNanos        atomic.Int64
	// Starting, StartingJobs and StartingNanos are ReserveStarting's
	// calls, jobs and time.
	Starting, StartingJobs atomic.Int64
	StartingNanos          atomic.Int64
	// Complete, CompleteStarts, CompleteOuts and CompleteNanos are
	// Complete's calls, the leases of each list and its time.
	Complete, CompleteStarts, CompleteOuts atomic.Int64
	CompleteNanos                          atomic.Int64

	// byQueue counts the reservations (Reserve, ReserveUnstarted and
	// ReserveStarting) of
	// one queue each, by queue name (see ByQueue).
	mu      sync.Mutex
	byQueue map[string]*queueCalls
}

// queueCalls are the reservations of one queue: calls, jobs returned,
// calls that returned none, and their time.
type queueCalls struct {
	calls, jobs, empty int
	nanos              time.Duration
}

// reserved counts a reservation of one queue (of several: not counted).
func (c *Calls) reserved(queues []string, jobs int, d time.Duration) {
	if len(queues) != 1 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byQueue == nil {
		c.byQueue = make(map[string]*queueCalls)
	}
	qc := c.byQueue[queues[0]]
	if qc == nil {
		qc = &queueCalls{}
		c.byQueue[queues[0]] = qc
	}
	qc.calls++
	qc.jobs += jobs
	qc.nanos += d
	if jobs == 0 {
		qc.empty++
	}
}

// ByQueue summarises the reservations of one queue each, per queue in
// the order given: calls, jobs per call, how many came back empty, and
// the mean time of one.
func (c *Calls) ByQueue(queues ...string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var parts []string
	for _, q := range queues {
		qc := c.byQueue[q]
		if qc == nil || qc.calls == 0 {
			parts = append(parts, q+" no reservation")
			continue
		}
		parts = append(parts, fmt.Sprintf("%s %d calls x %.1f jobs, %d empty, %.2f ms each", q, qc.calls,
			float64(qc.jobs)/float64(qc.calls), qc.empty, qc.nanos.Seconds()*1e3/float64(qc.calls)))
	}
	return strings.Join(parts, "; ")
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
	per("ReserveStarting", c.Starting.Load(), c.StartingJobs.Load(), c.StartingNanos.Load())
	if n := c.Complete.Load(); n > 0 {
		parts = append(parts, fmt.Sprintf("Complete %d calls x %.1f starts + %.1f outcomes (%.2f ms each)", n,
			float64(c.CompleteStarts.Load())/float64(n), float64(c.CompleteOuts.Load())/float64(n), float64(c.CompleteNanos.Load())/float64(n)/1e6))
	}
	per("PushMany", c.PushMany.Load(), c.Pushed.Load(), 0)
	per("ExtendMany", c.Extend.Load(), c.Extended.Load(), 0)
	for _, v := range []struct {
		name string
		n    int64
	}{{"Push", c.Push.Load()}, {"Wait", c.Wait.Load()}} {
		if v.n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", v.name, v.n))
		}
	}
	return strings.Join(parts, "; ")
}

// counted wraps a Queue to count its calls. It keeps the abilities the
// Worker looks for (driver.CapabilitiesOf) and behaves as the Worker does
// when the wrapped queue lacks one: Wait sleeps for max, Heartbeat and
// ObserveRun do nothing, DefaultLease is zero.
type counted struct {
	queue.Queue
	c    *Calls
	caps driver.Capabilities
}

// unwrap returns the queue a counted wraps, or q itself.
func unwrap(q queue.Queue) queue.Queue {
	if c, ok := q.(*counted); ok {
		return c.Queue
	}
	return q
}

// count wraps q; the Calls it returns fill as the queue is used.
func count(q queue.Queue) (queue.Queue, *Calls) {
	c := &Calls{}
	return &counted{Queue: q, c: c, caps: driver.CapabilitiesOf(q)}, c
}

func (q *counted) ReserveUnstarted(ctx context.Context, queues []string, max int, lease time.Duration) ([]queue.Job, error) {
	start := time.Now()
	jobs, err := q.Queue.ReserveUnstarted(ctx, queues, max, lease)
	d := time.Since(start)
	q.c.reserved(queues, len(jobs), d)
	q.c.UnstartedNanos.Add(int64(d))
	q.c.Unstarted.Add(1)
	q.c.Prefetched.Add(int64(len(jobs)))
	return jobs, err
}

func (q *counted) ReserveStarting(ctx context.Context, queues []string, max int, lease time.Duration) ([]queue.Job, error) {
	start := time.Now()
	jobs, err := q.Queue.ReserveStarting(ctx, queues, max, lease)
	d := time.Since(start)
	q.c.reserved(queues, len(jobs), d)
	q.c.StartingNanos.Add(int64(d))
	q.c.Starting.Add(1)
	q.c.StartingJobs.Add(int64(len(jobs)))
	return jobs, err
}

func (q *counted) Reserve(ctx context.Context, queues []string, max int, lease time.Duration) ([]queue.Job, error) {
	start := time.Now()
	jobs, err := q.Queue.Reserve(ctx, queues, max, lease)
	d := time.Since(start)
	q.c.reserved(queues, len(jobs), d)
	q.c.ReserveNanos.Add(int64(d))
	q.c.Reserve.Add(1)
	q.c.Reserved.Add(int64(len(jobs)))
	if len(jobs) == 0 {
		q.c.EmptyReserve.Add(1)
	}
	return jobs, err
}

func (q *counted) Complete(ctx context.Context, starts []driver.Lease, outs []driver.Completion) ([]driver.Lease, []error, error) {
	start := time.Now()
	lost, errs, err := q.Queue.Complete(ctx, starts, outs)
	q.c.CompleteNanos.Add(int64(time.Since(start)))
	q.c.Complete.Add(1)
	q.c.CompleteStarts.Add(int64(len(starts)))
	q.c.CompleteOuts.Add(int64(len(outs)))
	return lost, errs, err
}

func (q *counted) Push(ctx context.Context, j queue.Job) error {
	q.c.Push.Add(1)
	return q.Queue.Push(ctx, j)
}

func (q *counted) PushMany(ctx context.Context, jobs []queue.Job) ([]bool, error) {
	q.c.PushMany.Add(1)
	q.c.Pushed.Add(int64(len(jobs)))
	return q.Queue.PushMany(ctx, jobs)
}

func (q *counted) ExtendMany(ctx context.Context, leases []driver.Lease, d time.Duration) ([]driver.Lease, error) {
	q.c.Extend.Add(1)
	q.c.Extended.Add(int64(len(leases)))
	return q.Queue.ExtendMany(ctx, leases, d)
}

func (q *counted) Wait(ctx context.Context, queues []string, max time.Duration) error {
	q.c.Wait.Add(1)
	if w := q.caps.Waiter; w != nil {
		return w.Wait(ctx, queues, max)
	}
	if !sleepCtx(ctx, max) {
		return ctx.Err()
	}
	return nil
}

func (q *counted) ObserveRun(r driver.RunRecord) {
	if o := q.caps.Reporter; o != nil {
		o.ObserveRun(r)
	}
}

func (q *counted) DefaultLease() time.Duration { return q.caps.DefaultLease }

func (q *counted) Heartbeat(ctx context.Context, w driver.WorkerInfo) error {
	if r := q.caps.Reporter; r != nil {
		return r.Heartbeat(ctx, w)
	}
	return nil
}

func (q *counted) Deregister(ctx context.Context, id string) error {
	if r := q.caps.Reporter; r != nil {
		return r.Deregister(ctx, id)
	}
	return nil
}

var (
	_ driver.Waiter         = (*counted)(nil)
	_ driver.Reporter       = (*counted)(nil)
	_ driver.LeaseDefaulter = (*counted)(nil)
)
