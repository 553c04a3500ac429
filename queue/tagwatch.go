package queue

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/meridianjobs/meridian/queue/driver"
)

// tagEvery is how often a worker reads the store's monitored tags and
// writes the records of its jobs that carry one: a tag monitored from the
// dashboard is recorded within about this long, and the store sees at
// most one read and one write per worker per tagEvery.
const tagEvery = time.Second

// tagWatch records, for the store's TagMonitor, the jobs a worker
// finishes that carry a monitored tag. While no tag is monitored the cost
// per job is one atomic load.
type tagWatch struct {
	store driver.TagMonitor
	ctx   context.Context
	log   *slog.Logger
	// monitored is the set last read from the store; nil or empty while
	// no tag is monitored.
	monitored atomic.Pointer[map[string]struct{}]

	mu      sync.Mutex
	pending []driver.TaggedJob
}

// tagState is the state each outcome recorded for a monitored tag leaves
// its job in.
var tagState = map[driver.Outcome]driver.JobState{
	driver.OutcomeDone: driver.StateDone, driver.OutcomeRetried: driver.StateScheduled,
	driver.OutcomeFailed: driver.StateDead, driver.OutcomeCancelled: driver.StateCancelled,
}

// note records j's attempt, which ended at at with outcome o and the error
// cause, under each of its tags that is monitored.
func (w *tagWatch) note(j *Job, o driver.Outcome, cause error, at time.Time) {
	m := w.monitored.Load()
	if m == nil || len(*m) == 0 || len(j.Tags) == 0 {
		return
	}
	state, ok := tagState[o]
	if !ok {
		return
	}
	msg := ""
	if cause != nil {
		msg = cause.Error()
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, tag := range j.Tags {
		if _, ok := (*m)[tag]; !ok {
			continue
		}
		if len(w.pending) >= driver.MaxTaggedJobs*len(*m) {
			return // the store keeps no more than this per flush anyway
		}
		w.pending = append(w.pending, driver.TaggedJob{Tag: tag, ID: j.ID, Queue: j.QueueName(), Name: j.Name,
			State: state, At: at, Attempts: j.Attempts, Error: msg})
	}
}

// refresh reads the monitored tags and writes the pending records.
func (w *tagWatch) refresh() {
	w.mu.Lock()
	recs := w.pending
	w.pending = nil
	w.mu.Unlock()
	if len(recs) > 0 {
		if err := w.store.RecordTagged(w.ctx, recs); err != nil && w.ctx.Err() == nil {
			w.log.Warn("queue: recording the jobs of monitored tags", "jobs", len(recs), "err", err)
		}
	}
	tags, err := w.store.MonitoredTags(w.ctx)
	if err != nil {
		if w.ctx.Err() == nil {
			w.log.Warn("queue: reading the monitored tags", "err", err)
		}
		return
	}
	m := make(map[string]struct{}, len(tags))
	for _, t := range tags {
		m[t] = struct{}{}
	}
	w.monitored.Store(&m)
}

// run refreshes every tagEvery until done is closed, then writes what is
// pending. The Worker refreshes once before it runs a job, so the tags
// monitored when it starts are recorded from its first job.
func (w *tagWatch) run(done <-chan struct{}) {
	t := time.NewTicker(tagEvery)
	defer t.Stop()
	for {
		select {
		case <-done:
			w.refresh()
			return
		case <-t.C:
			w.refresh()
		}
	}
}
