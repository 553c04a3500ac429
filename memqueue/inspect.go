package memqueue

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// Page sizes of ListJobs.
const (
	defaultPageSize = 50
	maxPageSize     = 500
)

// metricsWindow is how far back per-minute metrics are kept and
// QueueStats looks; hourly points are kept for driver.MetricsRetention.
const metricsWindow = time.Hour

// Ring sizes of the per-minute and hourly metrics, and the most job names
// one slot keeps apart: the runs of further names in that minute or hour
// are counted under the name "(other)".
const (
	minuteSlots     = 60
	hourSlots       = int64(driver.MetricsRetention / time.Hour)
	maxNamesPerSlot = 1000
	otherName       = "(other)"
)

// metricSlot is one minute (or hour) of one queue's metrics, a point per
// job name, in a ring.
type metricSlot struct {
	at     int64 // Unix minute (or hour) the slot holds; 0 when unused
	points map[string]*driver.MetricPoint
}

// observe adds r to the slot for period at (a Unix minute or hour, of
// length span), unless the slot holds a newer one.
func (s *metricSlot) observe(at int64, span time.Duration, queueName string, r driver.RunRecord) {
	if s.at > at {
		return
	}
	if s.at != at {
		*s = metricSlot{at: at, points: make(map[string]*driver.MetricPoint)}
	}
	name := r.Name
	p := s.points[name]
	if p == nil {
		if len(s.points) >= maxNamesPerSlot {
			name = otherName
			p = s.points[name]
		}
		if p == nil {
			p = &driver.MetricPoint{Queue: queueName, Name: name, Minute: time.Unix(at*int64(span/time.Second), 0).UTC()}
			s.points[name] = p
		}
	}
	p.Observe(r)
}

// ObserveRun records r in its queue's per-minute metrics, kept for the
// last hour, and hourly ones, kept for driver.MetricsRetention, by job
// name. It updates them in place (a map lookup and a few additions under
// the queue's lock): memqueue has no store to write to.
func (q *Queue) ObserveRun(r driver.RunRecord) {
	name := r.Queue
	if name == "" {
		name = queue.DefaultQueue
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	start := r.Start
	if start.IsZero() {
		start = q.now()
	}
	now := q.now().Unix()
	minute, hour := start.Unix()/60, start.Unix()/3600
	if hour <= now/3600-hourSlots {
		return // older than the retention
	}
	nq := q.namedQueueLocked(name)
	if minute > now/60-minuteSlots {
		nq.metrics[((minute%minuteSlots)+minuteSlots)%minuteSlots].observe(minute, time.Minute, name, r)
	}
	nq.hours[((hour%hourSlots)+hourSlots)%hourSlots].observe(hour, time.Hour, name, r)
}

// livePoints calls fn for each point of ring whose period is within the
// last len(ring) periods up to now and no earlier than since.
func livePoints(ring []metricSlot, now, since int64, fn func(p driver.MetricPoint)) {
	for _, s := range ring {
		if s.at == 0 || s.at <= now-int64(len(ring)) || s.at < since || s.at > now {
			continue
		}
		for _, p := range s.points {
			fn(*p)
		}
	}
}

// liveBuckets calls fn for each of nq's per-minute points within the
// window ending at nowMinute and starting no earlier than sinceMinute.
func (nq *namedQueue) liveBuckets(nowMinute, sinceMinute int64, fn func(p driver.MetricPoint)) {
	livePoints(nq.metrics[:], nowMinute, sinceMinute, fn)
}

// QueueStats returns one entry per queue that has jobs (dead letters
// included), is paused or has metrics in the last hour, sorted by name.
// Counts are exact.
func (q *Queue) QueueStats(ctx context.Context) ([]driver.QueueStats, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("memqueue: reading queue stats: %w", err)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.now()
	nowMinute := now.Unix() / 60
	var out []driver.QueueStats
	for _, nq := range q.queues {
		nq.promote(now.UnixNano(), now)
		s := driver.QueueStats{
			Queue:     nq.name,
			Paused:    nq.paused,
			Ready:     driver.Count{N: int64(nq.ready.len())},
			Scheduled: driver.Count{N: int64(nq.scheduled.len())},
			Running:   driver.Count{N: int64(nq.running.len())},
			Dead:      driver.Count{N: int64(len(nq.dead))},
			Window:    metricsWindow,
		}
		var runtime, wait time.Duration
		var recent int64
		recentFrom := now.Add(-driver.RateWindow).Truncate(time.Minute)
		nq.liveBuckets(nowMinute, 0, func(p driver.MetricPoint) {
			if !p.Minute.Before(recentFrom) {
				recent += p.Processed
			}
			s.Processed += p.Processed
			s.Failed += p.Failed
			runtime += p.TotalRuntime
			wait += p.TotalWait
			s.MaxRuntime = max(s.MaxRuntime, p.MaxRuntime)
		})
		if runs := s.Processed + s.Failed; runs > 0 {
			s.AvgRuntime = runtime / time.Duration(runs)
			s.AvgWait = wait / time.Duration(runs)
		}
		s.JobsPerMinute = driver.PerMinute(recent, now)
		if s.Ready.N+s.Scheduled.N+s.Running.N+s.Dead.N == 0 && !s.Paused && s.Processed+s.Failed == 0 {
			continue
		}
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b driver.QueueStats) int { return cmp.Compare(a.Queue, b.Queue) })
	return out, nil
}

// Metrics returns the per-minute points of every queue and job name from
// since's minute to now (at most the last hour), oldest first, then by
// queue and name. Minutes without runs have no point.
func (q *Queue) Metrics(ctx context.Context, since time.Time) ([]driver.MetricPoint, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("memqueue: reading metrics: %w", err)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	nowMinute := q.now().Unix() / 60
	sinceMinute := since.Unix() / 60
	var out []driver.MetricPoint
	for _, nq := range q.queues {
		nq.liveBuckets(nowMinute, sinceMinute, func(p driver.MetricPoint) { out = append(out, p) })
	}
	sortPoints(out)
	return out, nil
}

// HourlyMetrics returns the hourly points of every queue and job name
// from since's hour to now (at most driver.MetricsRetention), oldest
// first, then by queue and name.
func (q *Queue) HourlyMetrics(ctx context.Context, since time.Time) ([]driver.MetricPoint, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("memqueue: reading hourly metrics: %w", err)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	nowHour := q.now().Unix() / 3600
	var out []driver.MetricPoint
	for _, nq := range q.queues {
		livePoints(nq.hours[:], nowHour, since.Unix()/3600, func(p driver.MetricPoint) { out = append(out, p) })
	}
	sortPoints(out)
	return out, nil
}

// sortPoints orders points by time, then queue, then name.
func sortPoints(points []driver.MetricPoint) {
	slices.SortFunc(points, func(a, b driver.MetricPoint) int {
		return cmp.Or(a.Minute.Compare(b.Minute), cmp.Compare(a.Queue, b.Queue), cmp.Compare(a.Name, b.Name))
	})
}

// ListJobs returns one page of jobs in f.State matching f, in the order
// the SQL drivers list them: waiting and running jobs in claim order
// (priority, then AvailableAt, then insertion), dead, done and cancelled
// jobs by the time they finished, newest first. Done jobs are the last WithRetention acked ones. Limit defaults to
// 50 and is capped at 500. A search examines every candidate unless
// f.Scan bounds it. The cursor is opaque; a malformed one is an error.
func (q *Queue) ListJobs(ctx context.Context, f driver.JobFilter) (driver.JobPage, error) {
	if err := ctx.Err(); err != nil {
		return driver.JobPage{}, fmt.Errorf("memqueue: listing jobs: %w", err)
	}
	var after *listKey
	if f.After != "" {
		k, err := parseListKey(f.After)
		if err != nil {
			return driver.JobPage{}, fmt.Errorf("memqueue: listing jobs after %q: %w", f.After, queue.ErrBadCursor)
		}
		after = &k
	}
	switch f.State {
	case queue.StateReady, queue.StateScheduled, queue.StateRunning, queue.StateDead, queue.StateDone, queue.StateCancelled, driver.StateGrouped, driver.StateSequenced:
	default:
		return driver.JobPage{}, fmt.Errorf("memqueue: listing jobs: unknown state %q", f.State)
	}
	limit := f.Limit
	if limit <= 0 {
		limit = defaultPageSize
	}
	limit = min(limit, maxPageSize)
	search, err := driver.ParseSearch(f.Search)
	if err != nil {
		return driver.JobPage{}, fmt.Errorf("memqueue: listing jobs: %w", err)
	}

	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.now()
	var match []*entry
	keep := func(e *entry) {
		if (after != nil && listKeyOf(e).compare(*after) <= 0) || e.state != f.State ||
			(f.Queue != "" && e.job.Queue != f.Queue) ||
			(f.Name != "" && e.job.Name != f.Name) ||
			(f.Tag != "" && !slices.Contains(e.job.Tags, f.Tag)) {
			return
		}
		match = append(match, e)
	}
	if f.State == queue.StateDone || f.State == queue.StateCancelled {
		for _, e := range q.done {
			keep(e)
		}
	} else {
		for _, nq := range q.selectQueuesLocked(f.Queue) {
			nq.promote(now.UnixNano(), now)
			switch f.State {
			case queue.StateReady:
				nq.ready.each(keep)
			case queue.StateScheduled:
				for _, e := range nq.scheduled.items {
					keep(e)
				}
			case queue.StateRunning:
				for _, e := range nq.running.items {
					keep(e)
				}
			case queue.StateDead:
				for _, e := range nq.dead {
					keep(e)
				}
			case driver.StateGrouped:
				for _, g := range nq.groups {
					for _, e := range g.members {
						keep(e)
					}
				}
			case driver.StateSequenced:
				for _, s := range nq.seqs {
					for _, e := range s.members[1:] {
						keep(e)
					}
				}
			}
		}
	}
	slices.SortFunc(match, func(a, b *entry) int { return listKeyOf(a).compare(listKeyOf(b)) })
	var page driver.JobPage
	if !search.IsZero() {
		// The search examines the candidates in order, up to f.Scan of
		// them, and stops early once it has one match past the page.
		var hits []*entry
		examined := 0
		for _, e := range match {
			if f.Scan > 0 && examined == f.Scan || len(hits) > limit {
				break
			}
			examined++
			if search.Match(e.job.Payload) {
				hits = append(hits, e)
			}
		}
		if len(hits) <= limit && examined < len(match) {
			page.Scanned = examined
			page.Next = listKeyOf(match[examined-1]).String()
		}
		match = hits
	}
	if len(match) > limit {
		match = match[:limit]
		page.Next = listKeyOf(match[limit-1]).String()
	}
	page.Jobs = make([]driver.JobInfo, len(match))
	for i, e := range match {
		page.Jobs[i] = e.info()
	}
	return page, nil
}

func (e *entry) info() driver.JobInfo {
	return driver.JobInfo{Job: e.job, State: e.state, UpdatedAt: e.updatedAt, FinishedAt: e.finishedAt(),
		StartedAt: e.startedAt, Worker: e.worker}
}

// GetJob returns the job id in whatever state it is (a done job only while
// it is retained), or an error matching queue.ErrNotFound.
func (q *Queue) GetJob(ctx context.Context, id string) (driver.JobInfo, error) {
	if err := ctx.Err(); err != nil {
		return driver.JobInfo{}, fmt.Errorf("memqueue: getting job %s: %w", id, err)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	e := q.jobs[id]
	if e == nil {
		return driver.JobInfo{}, fmt.Errorf("memqueue: getting job %s: %w", id, queue.ErrNotFound)
	}
	now := q.now()
	e.nq.promote(now.UnixNano(), now)
	info := e.info()
	info.History = e.attempts()
	if e.history != nil {
		info.Actions = slices.Clone(e.history.actions)
	}
	return info, nil
}

// Pause stops Reserve from taking jobs of queueName until Resume. Pushes
// are still accepted.
func (q *Queue) Pause(ctx context.Context, queueName string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memqueue: pausing queue %s: %w", queueName, err)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.namedQueueLocked(queueName).paused = true
	return nil
}

// Resume lets Reserve take jobs of queueName again and wakes its waiters.
// Resuming a queue that is not paused does nothing.
func (q *Queue) Resume(ctx context.Context, queueName string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memqueue: resuming queue %s: %w", queueName, err)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if nq := q.queues[queueName]; nq != nil && nq.paused {
		nq.paused = false
		nq.signal()
	}
	return nil
}

// Paused lists the paused queues, sorted.
func (q *Queue) Paused(ctx context.Context) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("memqueue: listing paused queues: %w", err)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	var out []string
	for name, nq := range q.queues {
		if nq.paused {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out, nil
}

// Heartbeat creates or refreshes the registry entry w.ID with LastSeen set
// to now, keeping the jobs w reports it holds for Workers to list. Entries
// not refreshed for a minute are dropped. The running counts and lists do
// not use the reports: the Queue holds every lease itself, so they are
// exact whoever reserved the jobs.
func (q *Queue) Heartbeat(ctx context.Context, w driver.WorkerInfo) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memqueue: recording heartbeat of worker %s: %w", w.ID, err)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	w.Queues = slices.Clone(w.Queues)
	w.Running, w.Reserved = heldCopy(w.Running), heldCopy(w.Reserved)
	w.LastSeen = q.now()
	q.workers[w.ID] = w
	return nil
}

// heldCopy copies a WorkerInfo's count of held jobs by queue, leaving
// out the zero ones; nil when none is left.
func heldCopy(m map[string]int) map[string]int {
	var out map[string]int
	for name, n := range m {
		if n != 0 {
			if out == nil {
				out = make(map[string]int, len(m))
			}
			out[name] = n
		}
	}
	return out
}

// Deregister removes the registry entry id; removing an unknown entry does
// nothing.
func (q *Queue) Deregister(ctx context.Context, id string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memqueue: deregistering worker %s: %w", id, err)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.workers, id)
	delete(q.fleet.byWorker, id)
	return nil
}

// Workers lists the entries seen in the last minute, sorted by ID.
func (q *Queue) Workers(ctx context.Context) ([]driver.WorkerInfo, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("memqueue: listing workers: %w", err)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	cutoff := q.now().Add(-workerTTL)
	var out []driver.WorkerInfo
	for id, w := range q.workers {
		if w.LastSeen.Before(cutoff) {
			delete(q.workers, id)
			delete(q.fleet.byWorker, id)
			continue
		}
		w.Queues = slices.Clone(w.Queues)
		w.Running, w.Reserved = heldCopy(w.Running), heldCopy(w.Reserved)
		out = append(out, w)
	}
	slices.SortFunc(out, func(a, b driver.WorkerInfo) int { return cmp.Compare(a.ID, b.ID) })
	return out, nil
}

// Counts returns each queue's jobs by state (queue.Counter), sorted by
// name; queues holding no job are left out. Every count is exact: ready,
// scheduled, running and dead are the lengths of the queue's own
// structures, done and cancelled are counted over the ring of retained
// finished jobs (at most the retention, 1,000 by default).
func (q *Queue) Counts(ctx context.Context) ([]driver.QueueCounts, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("memqueue: reading job counts: %w", err)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.now()
	finished := map[string]*[2]int64{}
	for _, e := range q.done {
		if q.jobs[e.job.ID] != e {
			continue
		}
		i := 0
		switch e.state {
		case queue.StateDone:
		case queue.StateCancelled:
			i = 1
		default:
			continue
		}
		f := finished[e.nq.name]
		if f == nil {
			f = new([2]int64)
			finished[e.nq.name] = f
		}
		f[i]++
	}
	var out []driver.QueueCounts
	for _, nq := range q.queues {
		nq.promote(now.UnixNano(), now)
		c := driver.QueueCounts{
			Queue:     nq.name,
			Ready:     driver.Count{N: int64(nq.ready.len())},
			Scheduled: driver.Count{N: int64(nq.scheduled.len())},
			Running:   driver.Count{N: int64(nq.running.len())},
			Dead:      int64(len(nq.dead)),
			Grouped:   int64(nq.grouped()),
			Sequenced: int64(nq.sequenced()),
		}
		c.Pending = c.Ready.N + c.Scheduled.N + c.Running.N
		if f := finished[nq.name]; f != nil {
			c.Done, c.Cancelled = f[0], f[1]
		}
		if c.Pending+c.Dead+c.Done+c.Cancelled+c.Grouped+c.Sequenced == 0 {
			continue
		}
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b driver.QueueCounts) int { return cmp.Compare(a.Queue, b.Queue) })
	return out, nil
}

var _ driver.Inspector = (*Queue)(nil)
