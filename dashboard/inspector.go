package dashboard

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// PageSize is how many rows a page of a list holds.
const PageSize = 50

// Inspector is the read and act seam that Handler renders: the cookbook's
// interface. NewInspector adapts a Stats and a FailedJobs store (cookbook
// mode); ForQueue adapts a driver (driver mode). Implementations must be
// safe for concurrent use.
type Inspector interface {
	// Stats returns per-queue counters and their totals.
	Stats() (StatsView, error)
	// Pending returns page (1-based) of the jobs waiting on queue.
	Pending(queue string, page int) ([]JobView, error)
	// Failed returns page (1-based) of the failed (dead-lettered) jobs.
	Failed(page int) ([]JobView, error)
	// Retry re-enqueues the failed job id and drops its failed record.
	Retry(id string) error
	// Forget drops the failed job id without re-enqueueing it.
	Forget(id string) error
	// FlushFailed drops every failed job.
	FlushFailed() error
}

// JobView is a job as the dashboard shows it: the job, its state and its
// timestamps. It is driver.JobInfo under the cookbook's name. For a failed
// job State is queue.StateDead, LastError holds the error and FinishedAt
// the time it failed.
type JobView = driver.JobInfo

// StatsView is a snapshot of every queue's figures.
type StatsView struct {
	Queues []QueueStats // sorted by queue name
	Totals QueueStats   // the sums over Queues; Totals.Queue is "all"
	At     time.Time    // when the snapshot was taken
	// Processes is the number of live worker processes in the driver's
	// registry, -1 when the Source has none (cookbook mode, or a driver
	// without a driver.Reporter).
	Processes int
	// FailedPastWeek counts the dead letters dead-lettered in the last
	// seven days (Horizon's "failed jobs past 7 days"); nil when the
	// Source cannot tell.
	FailedPastWeek *driver.Count
	// Stale is set when reading the figures failed or timed out and these
	// are the last ones read, at At.
	Stale bool
}

// QueueStats is one queue's figures. It embeds driver.QueueStats, which a
// driver fills in whole (driver mode: counts of jobs by state, capped, and
// throughput, runtime and wait over the driver's window). In cookbook mode
// the counters are totals since NewStats: Queue, Processed and Failed are
// set, Ready equals Pending and the rest is zero.
type QueueStats struct {
	driver.QueueStats
	// Pending counts jobs waiting to run. Cookbook mode: pushed minus
	// processed minus failed. Driver mode: ready plus scheduled (exact
	// where the driver keeps counts, queue.Counter; else each exact up to
	// the driver's cap).
	Pending int64
	// Pushed and Retried are cookbook-mode counters (OnPushed, OnRetried);
	// zero in driver mode.
	Pushed  int64
	Retried int64
	// Throughput is jobs processed per second: over the last minute in
	// cookbook mode, over the driver's window in driver mode.
	Throughput float64
	// OldestReady is when the queue's oldest ready job became available
	// (its wait started): Horizon's "max wait" is the time since. Zero
	// when no job is ready or the driver cannot tell. In Totals, the earliest over the queues.
	OldestReady time.Time
	// Unserved is set when the queue has ready jobs and no live worker in
	// the driver's registry serves it. In Totals, when any queue is.
	Unserved bool
}

// MaxWait is how long the queue's oldest ready job has waited at now, zero
// when none is ready.
func (q QueueStats) MaxWait(now time.Time) time.Duration {
	if q.OldestReady.IsZero() || !now.After(q.OldestReady) {
		return 0
	}
	return now.Sub(q.OldestReady)
}

// NewInspector returns the Source (and Inspector) over the in-process
// counters stats and the failed-job store failed: the cookbook's wiring.
// Either may be nil: a nil stats gives empty counters; a nil store gives an
// empty failed list and makes Retry, Forget and FlushFailed fail. Pending
// lists nothing (a Stats counts jobs, it does not hold them).
func NewInspector(stats *Stats, failed FailedJobs) *MemoryInspector {
	if m, ok := failed.(*MemoryFailedJobs); ok && m == nil {
		failed = nil
	}
	return &MemoryInspector{stats: stats, failed: failed}
}

// errNoStore is returned by the actions of an inspector without a store.
var errNoStore = errors.New("dashboard: no failed-job store configured")

// MemoryInspector is the Source of the in-process counters (cookbook
// mode): the figures are what this process counted in its Stats, the
// failed list is what its FailedJobs store holds, and the charts come from
// the Stats' per-minute history. It is also the cookbook's Inspector.
// Build one with NewInspector; it is safe for concurrent use.
type MemoryInspector struct {
	stats  *Stats
	failed FailedJobs
}

// Abilities are the overview with its throughput chart, the failed list by
// page number, and a failed job's detail page.
func (m *MemoryInspector) Abilities() Abilities { return Abilities{Charts: true, Detail: true} }

// Figures returns Stats().
func (m *MemoryInspector) Figures(context.Context) (StatsView, error) { return m.Stats() }

// Metrics returns the processed and failed counts by minute since since;
// runtime and wait are not counted in process and are zero.
func (m *MemoryInspector) Metrics(_ context.Context, since time.Time) ([]driver.MetricPoint, error) {
	return m.stats.metrics(since), nil
}

// List serves the failed jobs by page number; pending jobs are not held in
// process and list empty.
func (m *MemoryInspector) List(ctx context.Context, q ListQuery) (JobList, error) {
	return listByPage(q, func(page int) ([]JobView, error) { return m.failedPage(ctx, page) }, m.Pending)
}

// RetryJob is Retry with a context for the store.
func (m *MemoryInspector) RetryJob(ctx context.Context, id string) error {
	if m.failed == nil {
		return errNoStore
	}
	return m.failed.Retry(ctx, id)
}

// ForgetJob is Forget with a context for the store.
func (m *MemoryInspector) ForgetJob(ctx context.Context, id string) error {
	if m.failed == nil {
		return errNoStore
	}
	return m.failed.Forget(ctx, id)
}

// Flush drops every failed job, whatever queue is named (the in-process
// list is not split by queue), and reports -1: the count is not known.
func (m *MemoryInspector) Flush(ctx context.Context, _ string) (int, error) {
	return -1, m.flush(ctx)
}

// SetPaused fails: in-process counters cannot pause a queue.
func (m *MemoryInspector) SetPaused(context.Context, string, bool) error {
	return fmt.Errorf("dashboard: pausing queues: %w", queue.ErrUnsupported)
}

// Workers fails: in-process counters keep no worker registry.
// CancelJob is unsupported: the in-process figures hold no jobs to cancel.
func (m *MemoryInspector) CancelJob(_ context.Context, id string) (driver.JobState, error) {
	return "", fmt.Errorf("dashboard: cancelling job %s: %w", id, queue.ErrUnsupported)
}

// Periodics is unsupported: periodic jobs live in a queue driver.
func (m *MemoryInspector) Periodics(context.Context) ([]driver.PeriodicInfo, error) {
	return nil, fmt.Errorf("dashboard: listing periodic jobs: %w", queue.ErrUnsupported)
}

func (m *MemoryInspector) Workers(context.Context) ([]driver.WorkerInfo, error) {
	return nil, fmt.Errorf("dashboard: listing workers: %w", queue.ErrUnsupported)
}

// Stats returns the counters and, when the store is a MemoryFailedJobs,
// the number of failed jobs it holds now as Totals.Dead.
func (m *MemoryInspector) Stats() (StatsView, error) {
	sv := m.stats.view()
	sv.Processes = -1
	if mf, ok := m.failed.(*MemoryFailedJobs); ok {
		// The failed list is what the store holds now.
		n := int64(mf.Len())
		sv.Totals.Dead = driver.Count{N: n}
	}
	return sv, nil
}

// Pending lists nothing: a Stats counts jobs, it does not hold them.
func (m *MemoryInspector) Pending(string, int) ([]JobView, error) { return nil, nil }

// Failed returns page (1-based) of the store's failed jobs, newest first.
func (m *MemoryInspector) Failed(page int) ([]JobView, error) {
	return m.failedPage(context.Background(), page)
}

func (m *MemoryInspector) failedPage(ctx context.Context, page int) ([]JobView, error) {
	if m.failed == nil {
		return nil, nil
	}
	page = max(page, 1)
	offset := (page - 1) * PageSize
	var fjs []FailedJob
	if mf, ok := m.failed.(*MemoryFailedJobs); ok {
		fjs = mf.page(offset, PageSize)
	} else {
		all, err := m.failed.List(ctx)
		if err != nil {
			return nil, fmt.Errorf("dashboard: listing failed jobs: %w", err)
		}
		if offset < len(all) {
			fjs = all[offset:min(len(all), offset+PageSize)]
		}
	}
	out := make([]JobView, len(fjs))
	for i, fj := range fjs {
		out[i] = failedView(fj)
	}
	return out, nil
}

// failedView shows a FailedJob as a dead job. Its ID is the record's.
func failedView(fj FailedJob) JobView {
	v := JobView{Job: fj.Job, State: queue.StateDead, UpdatedAt: fj.FailedAt, FinishedAt: fj.FailedAt}
	v.ID = fj.ID
	if v.Queue == "" {
		v.Queue = fj.Queue
	}
	if fj.Err != "" {
		v.LastError = fj.Err
	}
	return v
}

// Retry re-enqueues the failed job id through the store.
func (m *MemoryInspector) Retry(id string) error { return m.RetryJob(context.Background(), id) }

// Forget drops the failed job id from the store.
func (m *MemoryInspector) Forget(id string) error { return m.ForgetJob(context.Background(), id) }

// FlushFailed drops every failed job from the store.
func (m *MemoryInspector) FlushFailed() error { return m.flush(context.Background()) }

func (m *MemoryInspector) flush(ctx context.Context) error {
	if m.failed == nil {
		return errNoStore
	}
	if f, ok := m.failed.(interface{ Flush(context.Context) error }); ok {
		return f.Flush(ctx)
	}
	all, err := m.failed.List(ctx)
	if err != nil {
		return fmt.Errorf("dashboard: listing failed jobs: %w", err)
	}
	for _, fj := range all {
		if err := m.failed.Forget(ctx, fj.ID); err != nil && !errors.Is(err, ErrNotFound) {
			return fmt.Errorf("dashboard: forgetting failed job %s: %w", fj.ID, err)
		}
	}
	return nil
}

// Job finds the failed record id.
func (m *MemoryInspector) Job(ctx context.Context, id string) (JobView, error) {
	switch f := m.failed.(type) {
	case nil:
	case *MemoryFailedJobs:
		if fj, ok := f.get(id); ok {
			return failedView(fj), nil
		}
	default:
		all, err := f.List(ctx)
		if err != nil {
			return JobView{}, fmt.Errorf("dashboard: listing failed jobs: %w", err)
		}
		for _, fj := range all {
			if fj.ID == id {
				return failedView(fj), nil
			}
		}
	}
	return JobView{}, fmt.Errorf("dashboard: job %s: %w", id, ErrNotFound)
}
