package scale

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// JobName is the name of every job Fill pushes; Job handles it.
const JobName = "scale"

// Job is the payload of the jobs Fill pushes and of live traffic.
type Job struct {
	N    int    `json:"n"`
	Note string `json:"note"`
}

// JobName routes Job to its handler (queue.Namer).
func (Job) JobName() string { return JobName }

// Backlog is the queue Fill gives a deep backlog that no worker serves.
const Backlog = "backlog"

// Shape is how many jobs Fill stores and how they are spread. The zero
// fractions take the defaults, the proportions of the store this package
// copies (1.7M rows: 1.3M done, 113k failed, 100k scheduled hours ahead,
// 161k waiting on a queue without a worker, the rest ready).
type Shape struct {
	Jobs   int // total jobs stored
	Queues int // served queues, named q1..qN (default 7), plus Backlog

	Done      float64 // acked and kept (default 0.76)
	Failed    float64 // dead letters (default 0.066)
	Scheduled float64 // due 1 to 12 hours ahead (default 0.059)
	Waiting   float64 // ready on Backlog (default 0.095); the rest is ready on the served queues
}

func (s Shape) withDefaults() Shape {
	if s.Queues <= 0 {
		s.Queues = 7
	}
	if s.Done == 0 && s.Failed == 0 && s.Scheduled == 0 && s.Waiting == 0 {
		s.Done, s.Failed, s.Scheduled, s.Waiting = 0.76, 0.066, 0.059, 0.095
	}
	return s
}

// Served lists the served queues of s.
func (s Shape) Served() []string {
	s = s.withDefaults()
	out := make([]string, s.Queues)
	for i := range out {
		out[i] = fmt.Sprintf("q%d", i+1)
	}
	return out
}

// Counts is what Fill stored.
type Counts struct {
	Done, Failed, Scheduled, Waiting, Ready int
}

// Fill stores s's jobs in q: pushed in batches, then worked off into done
// (acked) and failed (dead-lettered) sets with reserves of up to 1,000
// jobs, then the scheduled, backlog and ready jobs pushed. Fill must run before any worker serves the queues.
func Fill(ctx context.Context, q queue.Queue, s Shape) (Counts, error) {
	s = s.withDefaults()
	bp := q
	if s.Jobs <= 0 {
		return Counts{}, fmt.Errorf("scale: Jobs must be positive, got %d", s.Jobs)
	}
	c := Counts{
		Done: int(float64(s.Jobs) * s.Done), Failed: int(float64(s.Jobs) * s.Failed),
		Scheduled: int(float64(s.Jobs) * s.Scheduled), Waiting: int(float64(s.Jobs) * s.Waiting),
	}
	c.Ready = max(s.Jobs-c.Done-c.Failed-c.Scheduled-c.Waiting, 0)
	served := s.Served()
	n := 0
	push := func(count int, queueOf func(i int) string, at func(i int) time.Time) error {
		batch := make([]queue.Job, 0, 1000)
		flush := func() error {
			if len(batch) == 0 {
				return nil
			}
			if _, err := bp.PushMany(ctx, batch); err != nil {
				return fmt.Errorf("scale: pushing: %w", err)
			}
			batch = batch[:0]
			return nil
		}
		for i := range count {
			n++
			j, err := queue.NewJob(Job{N: n, Note: "order 4711 for customer 815, shipped by ground"}, queue.OnQueue(queueOf(i)))
			if err != nil {
				return err
			}
			if at != nil {
				j.AvailableAt = at(i)
			}
			batch = append(batch, j)
			if len(batch) == cap(batch) {
				if err := flush(); err != nil {
					return err
				}
			}
		}
		return flush()
	}
	spread := func(i int) string { return served[i%len(served)] }
	// Done: pushed and acked.
	if err := push(c.Done, spread, nil); err != nil {
		return c, err
	}
	if err := work(ctx, q, served, c.Done, func(ctx context.Context, jobs []queue.Job) error {
		return completeAll(ctx, q, jobs, driver.OutcomeDone, "")
	}); err != nil {
		return c, err
	}
	// Failed: pushed and dead-lettered.
	if err := push(c.Failed, spread, nil); err != nil {
		return c, err
	}
	if err := work(ctx, q, served, c.Failed, func(ctx context.Context, jobs []queue.Job) error {
		return completeAll(ctx, q, jobs, driver.OutcomeFailed, "scale: upstream answered 503")
	}); err != nil {
		return c, err
	}
	now := time.Now()
	if err := push(c.Scheduled, spread, func(i int) time.Time {
		return now.Add(time.Hour + time.Duration(i%(11*3600))*time.Second)
	}); err != nil {
		return c, err
	}
	if err := push(c.Waiting, func(int) string { return Backlog }, nil); err != nil {
		return c, err
	}
	return c, push(c.Ready, spread, nil)
}

// work reserves n jobs of queues, up to 1,000 at a time, and hands each
// batch to fn.
func work(ctx context.Context, q queue.Queue, queues []string, n int, fn func(context.Context, []queue.Job) error) error {
	for n > 0 {
		jobs, err := q.Reserve(ctx, queues, min(n, 1000), 10*time.Minute)
		if err != nil {
			return fmt.Errorf("scale: reserving: %w", err)
		}
		if len(jobs) == 0 {
			return fmt.Errorf("scale: %d jobs left to work but none ready", n)
		}
		if err := fn(ctx, jobs); err != nil {
			return err
		}
		n -= len(jobs)
	}
	return nil
}

// completeAll records outcome o, with reason, for every job of jobs in one
// Complete call.
func completeAll(ctx context.Context, q queue.Queue, jobs []queue.Job, o driver.Outcome, reason string) error {
	outs := make([]driver.Completion, len(jobs))
	for i, j := range jobs {
		outs[i] = driver.Completion{Lease: j.Lease(), Outcome: o, Reason: reason}
	}
	_, errs, err := q.Complete(ctx, nil, outs)
	if err == nil {
		err = errors.Join(errs...)
	}
	if err != nil {
		return fmt.Errorf("scale: recording %s: %w", o, err)
	}
	return nil
}
