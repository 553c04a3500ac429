package memqueue

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/meridianjobs/meridian/queue/driver"
)

// tagLists are the records of one monitored tag (driver.TagMonitor): the
// recent jobs and the failed ones, by job ID.
type tagLists struct {
	recent, failed map[string]driver.TaggedJob
}

// monitor holds the monitored tags, under a lock of its own: the Worker
// writes their records once a second, apart from the jobs' lock.
type monitor struct {
	mu   sync.Mutex
	tags map[string]*tagLists
}

// MonitorTag starts monitoring tag (see driver.TagMonitor).
func (q *Queue) MonitorTag(ctx context.Context, tag string) error {
	if err := cmp.Or(ctx.Err(), driver.CheckTag(tag)); err != nil {
		return fmt.Errorf("memqueue: monitoring tag %q: %w", tag, err)
	}
	q.monitor.mu.Lock()
	defer q.monitor.mu.Unlock()
	if q.monitor.tags[tag] != nil {
		return nil
	}
	if len(q.monitor.tags) >= driver.MaxMonitoredTags {
		return fmt.Errorf("memqueue: monitoring tag %q: %w", tag, driver.ErrTooManyTags)
	}
	if q.monitor.tags == nil {
		q.monitor.tags = make(map[string]*tagLists)
	}
	q.monitor.tags[tag] = &tagLists{recent: map[string]driver.TaggedJob{}, failed: map[string]driver.TaggedJob{}}
	return nil
}

// UnmonitorTag stops monitoring tag and drops its records.
func (q *Queue) UnmonitorTag(ctx context.Context, tag string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memqueue: unmonitoring tag %q: %w", tag, err)
	}
	q.monitor.mu.Lock()
	defer q.monitor.mu.Unlock()
	delete(q.monitor.tags, tag)
	return nil
}

// MonitoredTags lists the monitored tags, sorted.
func (q *Queue) MonitoredTags(ctx context.Context) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("memqueue: listing the monitored tags: %w", err)
	}
	q.monitor.mu.Lock()
	defer q.monitor.mu.Unlock()
	return slices.Sorted(maps.Keys(q.monitor.tags)), nil
}

// RecordTagged records jobs under their monitored tags, each list kept to
// its last driver.MaxTaggedJobs records.
func (q *Queue) RecordTagged(ctx context.Context, jobs []driver.TaggedJob) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memqueue: recording the jobs of monitored tags: %w", err)
	}
	q.monitor.mu.Lock()
	defer q.monitor.mu.Unlock()
	touched := make(map[*tagLists]bool)
	for _, j := range jobs {
		l := q.monitor.tags[j.Tag]
		if l == nil {
			continue
		}
		l.recent[j.ID] = j
		if j.State == driver.StateDead {
			l.failed[j.ID] = j
		}
		touched[l] = true
	}
	for l := range touched {
		trimTagged(l.recent)
		trimTagged(l.failed)
	}
	return nil
}

// TaggedJobs returns tag's records, newest first.
func (q *Queue) TaggedJobs(ctx context.Context, tag string, failed bool) ([]driver.TaggedJob, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("memqueue: reading the jobs of tag %q: %w", tag, err)
	}
	q.monitor.mu.Lock()
	defer q.monitor.mu.Unlock()
	l := q.monitor.tags[tag]
	if l == nil {
		return nil, nil
	}
	m := l.recent
	if failed {
		m = l.failed
	}
	out := slices.Collect(maps.Values(m))
	slices.SortFunc(out, func(a, b driver.TaggedJob) int { return -compareTagged(a, b) })
	return out, nil
}

// compareTagged orders records oldest first: by At, then by ID.
func compareTagged(a, b driver.TaggedJob) int {
	return cmp.Or(a.At.Compare(b.At), cmp.Compare(a.ID, b.ID))
}

// trimTagged drops the oldest records of m beyond driver.MaxTaggedJobs.
func trimTagged(m map[string]driver.TaggedJob) {
	over := len(m) - driver.MaxTaggedJobs
	if over <= 0 {
		return
	}
	all := slices.SortedFunc(maps.Values(m), compareTagged)
	for _, j := range all[:over] {
		delete(m, j.ID)
	}
}
