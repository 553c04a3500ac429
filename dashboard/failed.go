package dashboard

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// ErrNotFound is returned for an id that names no failed job (or, in driver
// mode, no job in the state the action needs). It is queue.ErrNotFound
// itself, so errors.Is matches either name whatever mode is in use.
var ErrNotFound = queue.ErrNotFound

// FailedJob is a dead-lettered job as a FailedJobs store keeps it.
type FailedJob struct {
	ID       string    // store-local id; Record uses Job.ID (a new ID when empty)
	Queue    string    // the logical queue the job failed on
	Job      queue.Job // the job as it failed, replayed verbatim on Retry
	Err      string    // the last handler error's message
	FailedAt time.Time // when it was recorded
}

// RequeueFunc puts a job back on its queue; FailedJobs stores call it on
// Retry. It is typically func(ctx, j) error { return q.Push(ctx, j) }.
type RequeueFunc func(ctx context.Context, j queue.Job) error

// FailedJobs is a dead-letter store that the cookbook-mode dashboard lists,
// retries and forgets. MemoryFailedJobs is the in-process implementation;
// implement it over a table to keep failed jobs in a database. Methods must
// be safe for concurrent use and return an error matching ErrNotFound for an
// unknown id. A store may also have Flush(ctx) error to drop every record
// at once; without it the dashboard forgets records one by one.
type FailedJobs interface {
	// List returns the failed jobs, newest first.
	List(ctx context.Context) ([]FailedJob, error)
	// Retry drops the record id and re-enqueues its job.
	Retry(ctx context.Context, id string) error
	// Forget drops the record id without re-enqueueing it.
	Forget(ctx context.Context, id string) error
}

// MemoryFailedJobs keeps failed jobs in memory, newest first. It is the
// reference FailedJobs store: records live until retried, forgotten or
// flushed, and vanish with the process. It is safe for concurrent use.
type MemoryFailedJobs struct {
	requeue RequeueFunc

	mu    sync.Mutex
	jobs  []FailedJob // oldest first; List reverses
	stats *Stats
}

// NewMemoryFailedJobs returns an empty store whose Retry re-enqueues through
// requeue. A nil requeue makes Retry forget-only: it drops the record and
// enqueues nothing.
func NewMemoryFailedJobs(requeue RequeueFunc) *MemoryFailedJobs {
	return &MemoryFailedJobs{requeue: requeue}
}

// WithStats makes a successful Retry count as a retry of the job's queue in
// stats (Stats.OnRetried). It returns m for chaining.
func (m *MemoryFailedJobs) WithStats(stats *Stats) *MemoryFailedJobs {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.stats = stats
	return m
}

// Record dead-letters job on the named queue with err as its error (nil
// records an empty message). A job whose ID is already recorded replaces
// the older record. The record's ID is job.ID, or a new ID when it is empty.
func (m *MemoryFailedJobs) Record(job queue.Job, queueName string, err error) {
	fj := FailedJob{ID: job.ID, Queue: queueName, Job: job, FailedAt: time.Now()}
	if fj.ID == "" {
		fj.ID = driver.NewID()
		fj.Job.ID = fj.ID
	}
	if err != nil {
		fj.Err = err.Error()
	}
	if fj.Job.LastError == "" {
		fj.Job.LastError = fj.Err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if i := m.index(fj.ID); i >= 0 {
		m.jobs = slices.Delete(m.jobs, i, i+1)
	}
	m.jobs = append(m.jobs, fj)
}

// Len reports how many failed jobs the store holds.
func (m *MemoryFailedJobs) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.jobs)
}

// List returns every failed job, newest first. The slice is the caller's.
func (m *MemoryFailedJobs) List(ctx context.Context) ([]FailedJob, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return m.page(0, -1), nil
}

// page returns up to limit records (all when limit < 0) from offset,
// newest first.
func (m *MemoryFailedJobs) page(offset, limit int) []FailedJob {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := len(m.jobs)
	if offset >= n {
		return nil
	}
	end := n
	if limit >= 0 {
		end = min(n, offset+limit)
	}
	out := make([]FailedJob, 0, end-offset)
	for i := n - 1 - offset; i >= n-end; i-- {
		out = append(out, m.jobs[i])
	}
	return out
}

// get returns the record id.
func (m *MemoryFailedJobs) get(id string) (FailedJob, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if i := m.index(id); i >= 0 {
		return m.jobs[i], true
	}
	return FailedJob{}, false
}

// Retry drops the record id and then re-enqueues its job through the
// RequeueFunc. Dropping first means two concurrent retries of one record
// enqueue the job once: the second gets ErrNotFound. If the requeue fails,
// the record is put back, so the job is never lost, and the error returned.
func (m *MemoryFailedJobs) Retry(ctx context.Context, id string) error {
	fj, err := m.take(id)
	if err != nil {
		return err
	}
	m.mu.Lock()
	requeue, stats := m.requeue, m.stats
	m.mu.Unlock()
	if requeue == nil {
		return nil
	}
	if err := requeue(ctx, fj.Job); err != nil {
		m.mu.Lock()
		if m.index(id) < 0 {
			m.jobs = append(m.jobs, fj)
			slices.SortStableFunc(m.jobs, func(a, b FailedJob) int { return a.FailedAt.Compare(b.FailedAt) })
		}
		m.mu.Unlock()
		return fmt.Errorf("dashboard: re-enqueueing failed job %s: %w", id, err)
	}
	stats.OnRetried(fj.Queue)
	return nil
}

// Forget drops the record id without re-enqueueing it.
func (m *MemoryFailedJobs) Forget(ctx context.Context, id string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	_, err := m.take(id)
	return err
}

// Flush drops every record.
func (m *MemoryFailedJobs) Flush(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.jobs = nil
	return nil
}

func (m *MemoryFailedJobs) take(id string) (FailedJob, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	i := m.index(id)
	if i < 0 {
		return FailedJob{}, ErrNotFound
	}
	fj := m.jobs[i]
	m.jobs = slices.Delete(m.jobs, i, i+1)
	return fj, nil
}

// index finds id, newest first (retries usually act on recent failures).
// The caller holds m.mu.
func (m *MemoryFailedJobs) index(id string) int {
	for i := len(m.jobs) - 1; i >= 0; i-- {
		if m.jobs[i].ID == id {
			return i
		}
	}
	return -1
}
