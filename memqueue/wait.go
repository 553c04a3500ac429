package memqueue

import (
	"context"
	"fmt"
	"reflect"
	"time"
)

// Wait blocks until a job may have become ready on one of queues (an empty
// list means queue.DefaultQueue), until max has elapsed, or until ctx is
// done, and returns ctx's error only in the last case.
//
// It returns at once when a job is ready. Otherwise it sleeps until the
// earliest of max, the next scheduled job's AvailableAt and the next lease
// expiry on those queues, and is woken at once by a Push, a retry, RetryDead
// or Resume that concerns one of them. Wake-ups may be spurious: the
// caller reserves and waits again.
func (q *Queue) Wait(ctx context.Context, queues []string, max time.Duration) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memqueue: waiting for jobs: %w", err)
	}
	if max <= 0 {
		return nil
	}
	if len(queues) == 0 {
		queues = defaultQueues
	}
	q.mu.Lock()
	now := q.now()
	nowN := now.UnixNano()
	deadline := addNanos(nowN, max)
	var buf [4]chan struct{}
	chans := buf[:0]
	for _, name := range queues {
		nq := q.namedQueueLocked(name)
		if !nq.paused {
			nq.promote(nowN, now)
			if nq.ready.len() > 0 {
				q.mu.Unlock()
				return nil
			}
			deadline = nq.nextDue(deadline)
		}
		if nq.wake == nil {
			nq.wake = make(chan struct{})
		}
		chans = append(chans, nq.wake)
	}
	q.mu.Unlock()

	d := time.Duration(deadline - nowN)
	if d <= 0 {
		return nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	if len(chans) == 1 {
		select {
		case <-chans[0]:
			return nil
		case <-timer.C:
			return nil
		case <-ctx.Done():
			return fmt.Errorf("memqueue: waiting for jobs: %w", ctx.Err())
		}
	}
	cases := make([]reflect.SelectCase, 0, len(chans)+2)
	cases = append(cases,
		reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ctx.Done())},
		reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(timer.C)})
	for _, c := range chans {
		cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(c)})
	}
	if chosen, _, _ := reflect.Select(cases); chosen == 0 {
		return fmt.Errorf("memqueue: waiting for jobs: %w", ctx.Err())
	}
	return nil
}
