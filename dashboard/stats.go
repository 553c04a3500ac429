package dashboard

import (
	"cmp"
	"slices"
	"sync"
	"time"

	"github.com/meridianjobs/meridian/queue/driver"
)

// Stats is a set of per-queue counters that the application feeds from its
// dispatch and worker wiring (cookbook mode). It also keeps, per queue, the
// counts of the last hour by minute, so the overview can chart throughput
// without a driver.
//
// Stats is in-process: each replica counts only what it saw. For numbers
// that agree across replicas use a driver through ForQueue.
//
// All methods are safe for concurrent use. The zero value is not usable;
// call NewStats.
type Stats struct {
	mu     sync.Mutex
	queues map[string]*counters
	now    func() time.Time
}

// counters holds one queue's totals and its recent history.
type counters struct {
	pushed, processed, retried, failed int64
	// seconds[i] counts processed jobs in the second whose Unix time modulo
	// 60 is i; stamp says which second the slot holds.
	seconds [60]slot
	// minutes[i] counts the minute whose Unix minute modulo 60 is i.
	minutes [60]minuteSlot
}

type slot struct {
	stamp int64
	n     int64
}

type minuteSlot struct {
	stamp             int64
	processed, failed int64
}

// NewStats returns an empty counter set.
func NewStats() *Stats {
	return &Stats{queues: make(map[string]*counters), now: time.Now}
}

// OnPushed counts one job dispatched to queue.
func (s *Stats) OnPushed(queue string) {
	s.update(queue, func(c *counters, _ time.Time) { c.pushed++ })
}

// OnProcessed counts one job of queue that succeeded.
func (s *Stats) OnProcessed(queue string) {
	s.update(queue, func(c *counters, now time.Time) {
		c.processed++
		sec := now.Unix()
		sl := &c.seconds[sec%60]
		if sl.stamp != sec {
			*sl = slot{stamp: sec}
		}
		sl.n++
		c.minute(now).processed++
	})
}

// OnRetried counts one failed attempt of a job of queue that will be tried
// again. The job stays pending.
func (s *Stats) OnRetried(queue string) {
	s.update(queue, func(c *counters, _ time.Time) { c.retried++ })
}

// OnFailed counts one job of queue that failed for good (dead-lettered).
func (s *Stats) OnFailed(queue string) {
	s.update(queue, func(c *counters, now time.Time) {
		c.failed++
		c.minute(now).failed++
	})
}

func (c *counters) minute(now time.Time) *minuteSlot {
	m := now.Unix() / 60
	sl := &c.minutes[m%60]
	if sl.stamp != m {
		*sl = minuteSlot{stamp: m}
	}
	return sl
}

func (s *Stats) update(queue string, f func(*counters, time.Time)) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.queues[queue]
	if c == nil {
		c = new(counters)
		s.queues[queue] = c
	}
	f(c, s.now())
}

// view returns the counters as a StatsView, queues sorted by name. A nil
// Stats gives an empty view.
func (s *Stats) view() StatsView {
	var sv StatsView
	if s == nil {
		sv.At = time.Now()
		return sv
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	sv.At = now
	sec := now.Unix()
	for name, c := range s.queues {
		var lastMinute int64
		for _, sl := range c.seconds {
			if sl.stamp > sec-60 && sl.stamp <= sec {
				lastMinute += sl.n
			}
		}
		qs := QueueStats{
			Pushed:     c.pushed,
			Retried:    c.retried,
			Pending:    max(c.pushed-c.processed-c.failed, 0),
			Throughput: float64(lastMinute) / 60,
		}
		qs.Queue = name
		qs.Processed = c.processed
		qs.Failed = c.failed
		qs.JobsPerMinute = float64(lastMinute)
		qs.Ready = driver.Count{N: qs.Pending}
		sv.Queues = append(sv.Queues, qs)
	}
	slices.SortFunc(sv.Queues, func(a, b QueueStats) int { return cmp.Compare(a.Queue, b.Queue) })
	sv.Totals = totals(sv.Queues)
	return sv
}

// metrics returns the per-minute counts since since, oldest first. Runtime
// and wait are unknown in cookbook mode and left zero.
func (s *Stats) metrics(since time.Time) []driver.MetricPoint {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	nowMin := s.now().Unix() / 60
	from := since.Unix() / 60
	var pts []driver.MetricPoint
	for name, c := range s.queues {
		for _, sl := range c.minutes {
			if sl.stamp == 0 || sl.stamp < from || sl.stamp > nowMin || sl.stamp <= nowMin-60 {
				continue
			}
			if sl.processed == 0 && sl.failed == 0 {
				continue
			}
			pts = append(pts, driver.MetricPoint{
				Queue:     name,
				Minute:    time.Unix(sl.stamp*60, 0).UTC(),
				Processed: sl.processed,
				Failed:    sl.failed,
			})
		}
	}
	slices.SortFunc(pts, func(a, b driver.MetricPoint) int {
		if c := a.Minute.Compare(b.Minute); c != 0 {
			return c
		}
		return cmp.Compare(a.Queue, b.Queue)
	})
	return pts
}

// totals sums the per-queue figures. Counts add up with their caps; the
// runtime maximum is the largest, the averages are weighted by the
// attempts each queue ran.
func totals(qs []QueueStats) QueueStats {
	var t QueueStats
	t.Queue = "all"
	var runtimeSum, waitSum float64
	var attempts int64
	for _, q := range qs {
		t.Pushed += q.Pushed
		t.Retried += q.Retried
		t.Pending += q.Pending
		t.Throughput += q.Throughput
		t.Ready = addCount(t.Ready, q.Ready)
		t.Scheduled = addCount(t.Scheduled, q.Scheduled)
		t.Running = addCount(t.Running, q.Running)
		t.Dead = addCount(t.Dead, q.Dead)
		t.Done = addCount(t.Done, q.Done)
		t.Cancelled = addCount(t.Cancelled, q.Cancelled)
		t.Window = max(t.Window, q.Window)
		if !q.OldestReady.IsZero() && (t.OldestReady.IsZero() || q.OldestReady.Before(t.OldestReady)) {
			t.OldestReady = q.OldestReady
		}
		t.Unserved = t.Unserved || q.Unserved
		t.Processed += q.Processed
		t.Failed += q.Failed
		t.JobsPerMinute += q.JobsPerMinute
		t.MaxRuntime = max(t.MaxRuntime, q.MaxRuntime)
		n := q.Processed + q.Failed
		attempts += n
		runtimeSum += float64(q.AvgRuntime) * float64(n)
		waitSum += float64(q.AvgWait) * float64(n)
	}
	if attempts > 0 {
		t.AvgRuntime = time.Duration(runtimeSum / float64(attempts))
		t.AvgWait = time.Duration(waitSum / float64(attempts))
	}
	return t
}

func addCount(a, b driver.Count) driver.Count {
	return driver.Count{N: a.N + b.N, More: a.More || b.More, Estimate: a.Estimate || b.Estimate}
}
