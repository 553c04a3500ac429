package dashboard

import (
	"context"
	"fmt"
	"time"

	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// Source is what the dashboard reads and acts through: every page and every
// API endpoint gets its data from one Source, and its Abilities decide which
// parts the pages offer. Each method takes the request's context, bounded by
// RequestTimeout.
//
// The package has three: ForQueue's *QueueInspector over a queue driver
// (figures shared by every replica), NewInspector's *MemoryInspector over
// the in-process Stats and a FailedJobs store (the cookbook's wiring), and
// InspectorSource over any other Inspector. Implementations must be safe
// for concurrent use. An ability a Source lacks makes its methods fail with
// an error that wraps queue.ErrUnsupported.
type Source interface {
	// Abilities reports which parts of the dashboard the Source supports.
	// It is called on every request and must be cheap and constant.
	Abilities() Abilities
	// Figures returns every queue's figures and their totals.
	Figures(ctx context.Context) (StatsView, error)
	// Metrics returns the per-minute points since since, oldest first
	// (Abilities().Charts).
	Metrics(ctx context.Context, since time.Time) ([]driver.MetricPoint, error)
	// List returns one page of the jobs q selects. A lease token on a
	// returned job is blanked by the dashboard before it shows the job.
	List(ctx context.Context, q ListQuery) (JobList, error)
	// Job returns the job id in whatever state it is, or an error wrapping
	// ErrNotFound (Abilities().Detail).
	Job(ctx context.Context, id string) (JobView, error)
	// RetryJob moves the failed job id back to ready; ForgetJob deletes it.
	// Both fail with an error wrapping ErrNotFound for an unknown id.
	RetryJob(ctx context.Context, id string) error
	ForgetJob(ctx context.Context, id string) error
	// Flush drops the failed jobs of queue ("" for every queue) and
	// reports how many, or -1 when it does not know.
	Flush(ctx context.Context, queue string) (int, error)
	// SetPaused pauses or resumes queue (Abilities().Pause).
	SetPaused(ctx context.Context, queue string, paused bool) error
	// Workers lists the worker processes (Abilities().Workers).
	Workers(ctx context.Context) ([]driver.WorkerInfo, error)
	// CancelJob cancels the job id if it has not finished, and returns
	// the state it was in (Abilities().Cancel). It fails with an error
	// wrapping ErrNotFound for an unknown id and queue.ErrFinished for a
	// job that already finished.
	CancelJob(ctx context.Context, id string) (driver.JobState, error)
	// Periodics lists the periodic jobs with their last and next ticks
	// (Abilities().Periodic).
	Periodics(ctx context.Context) ([]driver.PeriodicInfo, error)
}

// Abilities are the parts of the dashboard a Source supports.
type Abilities struct {
	// Browse: List serves every state, filtered by queue, name, tag and
	// payload search, in keyset pages (ListQuery.After, JobList.Next), and
	// Flush can be scoped to a queue. Without it List serves the failed
	// jobs and a queue's pending jobs by page number (ListQuery.Page,
	// JobList.NextPage) and Flush drops every failed job.
	Browse bool
	// ByState: the figures count jobs by state (QueueStats.Ready,
	// Scheduled, Running, Dead). Without it they are running totals
	// (Pending, Processed, Failed).
	ByState bool
	// Shared: the figures come from a store every replica shares. Without
	// it they are this process's own.
	Shared   bool
	Charts   bool // Metrics gives per-minute points for the charts
	Runtime  bool // the figures and points carry runtime and wait times
	Pause    bool // SetPaused works
	Workers  bool // Workers lists worker processes
	Detail   bool // Job finds a job by id: job pages
	Cancel   bool // CancelJob works: cancel buttons on waiting and running jobs
	Periodic bool // Periodics lists periodic jobs: the periodic page
	Batches  bool // the Source is a BatchSource that serves batches: the batches pages
	Graphs   bool // the Source is a GraphSource that serves graphs (package dag): the graphs pages
	Fleet    bool // the Source is a FleetSource: terminate, pause and continue workers
	// Amend: the Source is an AmendSource: retry with an edited payload,
	// run now, run a cancelled or done job again, dispatch a new job.
	Amend bool
	// Tags: the Source is a TagSource: monitored tags and their pages.
	Tags bool
	// Groups: the store gathers grouped jobs (driver.Grouper), so List
	// serves driver.StateGrouped: the job list's "grouped" tab.
	Groups bool
	// Sequences: the Source is a SequenceSource: the sequences held by a
	// dead job, and their release.
	Sequences bool
}

// ListQuery selects a page of a job list.
type ListQuery struct {
	State  driver.JobState
	Queue  string
	Name   string // with Abilities().Browse
	Tag    string // with Abilities().Browse
	Search string // a payload substring, with Abilities().Browse
	After  string // the keyset cursor from JobList.Next, with Abilities().Browse
	Page   int    // the 1-based page number, without Abilities().Browse
	Limit  int    // the page size; 0 for the Source's default (PageSize)
}

// JobList is one page of a job list.
type JobList struct {
	Jobs     []JobView
	Next     string // the cursor of the next page, "" on the last (Browse)
	NextPage int    // the number of the next page, 0 on the last (without Browse)
	// Scanned is set when a payload search stopped at its row bound
	// before it filled the page: how many jobs it examined. Next then
	// continues the search after them (driver.JobPage.Scanned).
	Scanned int
}

// hide blanks what a page must not show: a lease token would let a reader
// act on a running job through the queue itself.
func hide(j JobView) JobView {
	j.LeaseToken = ""
	return j
}

// InspectorSource returns the Source that serves insp, an Inspector of the
// cookbook's interface, through its own methods: the figures, failed jobs
// and a queue's pending jobs by page number, retry, forget and flush. Its
// methods ignore the context, as Inspector's take none. It panics if insp
// is nil.
func InspectorSource(insp Inspector) Source {
	if insp == nil {
		panic("dashboard: InspectorSource given a nil Inspector")
	}
	return inspectorSource{insp}
}

// inspectorSource is InspectorSource's Source.
type inspectorSource struct{ insp Inspector }

func (c inspectorSource) Abilities() Abilities { return Abilities{} }

func (c inspectorSource) Figures(context.Context) (StatsView, error) {
	sv, err := c.insp.Stats()
	if err != nil {
		return sv, fmt.Errorf("dashboard: reading stats: %w", err)
	}
	return sv, nil
}

func (c inspectorSource) Metrics(context.Context, time.Time) ([]driver.MetricPoint, error) {
	return nil, fmt.Errorf("dashboard: reading metrics: %w", queue.ErrUnsupported)
}

func (c inspectorSource) List(_ context.Context, q ListQuery) (JobList, error) {
	return listByPage(q, c.insp.Failed, c.insp.Pending)
}

// listByPage serves a page-numbered list from an Inspector's methods.
func listByPage(q ListQuery, failed func(page int) ([]JobView, error), pending func(queue string, page int) ([]JobView, error)) (JobList, error) {
	page := max(q.Page, 1)
	var jobs []JobView
	var err error
	switch q.State {
	case queue.StateDead:
		jobs, err = failed(page)
	case queue.StateReady:
		jobs, err = pending(q.Queue, page)
	default:
		return JobList{}, fmt.Errorf("dashboard: listing %s jobs: %w", q.State, queue.ErrUnsupported)
	}
	if err != nil {
		return JobList{}, fmt.Errorf("dashboard: listing %s jobs: %w", q.State, err)
	}
	l := JobList{Jobs: jobs}
	if len(jobs) >= PageSize {
		l.NextPage = page + 1
	}
	return l, nil
}

func (c inspectorSource) Job(context.Context, string) (JobView, error) {
	return JobView{}, fmt.Errorf("dashboard: job detail: %w", queue.ErrUnsupported)
}

func (c inspectorSource) RetryJob(_ context.Context, id string) error  { return c.insp.Retry(id) }
func (c inspectorSource) ForgetJob(_ context.Context, id string) error { return c.insp.Forget(id) }

func (c inspectorSource) Flush(context.Context, string) (int, error) {
	return -1, c.insp.FlushFailed()
}

func (c inspectorSource) SetPaused(context.Context, string, bool) error {
	return fmt.Errorf("dashboard: pausing queues: %w", queue.ErrUnsupported)
}

func (c inspectorSource) CancelJob(_ context.Context, id string) (driver.JobState, error) {
	return "", fmt.Errorf("dashboard: cancelling job %s: %w", id, queue.ErrUnsupported)
}

func (c inspectorSource) Periodics(context.Context) ([]driver.PeriodicInfo, error) {
	return nil, fmt.Errorf("dashboard: listing periodic jobs: %w", queue.ErrUnsupported)
}

func (c inspectorSource) Workers(context.Context) ([]driver.WorkerInfo, error) {
	return nil, fmt.Errorf("dashboard: listing workers: %w", queue.ErrUnsupported)
}
