package dashboard

import (
	"context"
	"fmt"
	"time"

	"github.com/meridianjobs/meridian/queue"
)

// source is what the pages read and act through. driverSource serves driver
// mode and cookbookSource any other Inspector; caps tells the templates
// which parts to show.
type source interface {
	caps() caps
	stats(ctx context.Context) (StatsView, error)
	// metrics returns per-minute points since since; callers check
	// caps().Charts first.
	metrics(ctx context.Context, since time.Time) ([]queue.MetricPoint, error)
	list(ctx context.Context, q listQuery) (jobList, error)
	job(ctx context.Context, id string) (JobView, error)
	retry(ctx context.Context, id string) error
	forget(ctx context.Context, id string) error
	// flush drops the failed jobs of queue ("" for all) and reports how many
	// when it knows (-1 when it does not).
	flush(ctx context.Context, queue string) (int, error)
	setPaused(ctx context.Context, queue string, paused bool) error
	workers(ctx context.Context) ([]queue.WorkerInfo, error)
}

// caps are the parts of the dashboard a source supports.
type caps struct {
	Driver  bool // keyset lists of every state with filters and search
	Charts  bool // throughput charts
	Runtime bool // runtime and wait figures
	Pause   bool
	Workers bool
	Detail  bool // job detail pages
}

// listQuery selects a page of a job list.
type listQuery struct {
	State  queue.JobState
	Queue  string
	Name   string
	Tag    string
	Search string
	After  string // keyset cursor (driver mode)
	Page   int    // 1-based page number (cookbook mode)
	Limit  int

	ref pageRef // where the page is, for its links (driver mode)
}

// jobList is one page of a job list.
type jobList struct {
	Jobs     []JobView
	Next     string // keyset cursor of the next page, "" on the last (driver mode)
	NextPage int    // the next page number, 0 on the last (cookbook mode)
}

// hide blanks what a page must not show: a lease token would let a reader
// act on a running job through the queue itself.
func hide(j JobView) JobView {
	j.LeaseToken = ""
	return j
}

// driverSource reads the driver, sharing the figures and metrics between
// concurrent requests (see statsTTL). Use a pointer: it holds the caches.
type driverSource struct {
	qi      *QueueInspector
	figures shared[StatsView]
	points  shared[[]queue.MetricPoint]
}

func (d *driverSource) caps() caps {
	ok := d.qi.insp != nil
	return caps{Driver: ok, Charts: ok, Runtime: ok, Pause: d.qi.pauser != nil, Workers: d.qi.workers != nil, Detail: ok}
}

func (d *driverSource) stats(ctx context.Context) (StatsView, error) {
	return d.figures.get(ctx, statsTTL, d.qi.stats)
}

// metrics shares one read of the last chartWindow; since is always about
// that far back.
func (d *driverSource) metrics(ctx context.Context, since time.Time) ([]queue.MetricPoint, error) {
	return d.points.get(ctx, statsTTL, func(ctx context.Context) ([]queue.MetricPoint, error) {
		return d.qi.metrics(ctx, since)
	})
}

// changed drops the shared figures after an action.
func (d *driverSource) changed() {
	d.figures.reset()
	d.points.reset()
}

func (d *driverSource) list(ctx context.Context, q listQuery) (jobList, error) {
	p, err := d.qi.listJobs(ctx, queue.JobFilter{
		State: q.State, Queue: q.Queue, Name: q.Name, Tag: q.Tag, Search: q.Search,
		After: q.After, Limit: q.Limit,
	})
	if err != nil {
		return jobList{}, err
	}
	l := jobList{Jobs: make([]JobView, len(p.Jobs)), Next: p.Next}
	for i, j := range p.Jobs {
		l.Jobs[i] = hide(j)
	}
	return l, nil
}

func (d *driverSource) job(ctx context.Context, id string) (JobView, error) {
	j, err := d.qi.job(ctx, id)
	return hide(j), err
}

func (d *driverSource) retry(ctx context.Context, id string) error {
	defer d.changed()
	return d.qi.retry(ctx, id)
}

func (d *driverSource) forget(ctx context.Context, id string) error {
	defer d.changed()
	return d.qi.forget(ctx, id)
}

func (d *driverSource) flush(ctx context.Context, q string) (int, error) {
	defer d.changed()
	return d.qi.flush(ctx, q)
}

func (d *driverSource) setPaused(ctx context.Context, q string, paused bool) error {
	defer d.changed()
	return d.qi.setPaused(ctx, q, paused)
}
func (d *driverSource) workers(ctx context.Context) ([]queue.WorkerInfo, error) {
	return d.qi.workerList(ctx)
}

// cookbookSource serves any Inspector through its own methods. Lists page
// by number; only failed and pending jobs can be listed.
type cookbookSource struct{ insp Inspector }

// jobFinder is the optional detail lookup of NewInspector's Inspector.
type jobFinder interface {
	job(ctx context.Context, id string) (JobView, error)
}

// metricser is the optional chart source of NewInspector's Inspector.
type metricser interface {
	metrics(since time.Time) []queue.MetricPoint
}

func (c cookbookSource) caps() caps {
	_, detail := c.insp.(jobFinder)
	_, charts := c.insp.(metricser)
	return caps{Detail: detail, Charts: charts}
}

func (c cookbookSource) stats(context.Context) (StatsView, error) {
	sv, err := c.insp.Stats()
	if err != nil {
		return sv, fmt.Errorf("dashboard: reading stats: %w", err)
	}
	return sv, nil
}

func (c cookbookSource) metrics(_ context.Context, since time.Time) ([]queue.MetricPoint, error) {
	if m, ok := c.insp.(metricser); ok {
		return m.metrics(since), nil
	}
	return nil, nil
}

func (c cookbookSource) list(_ context.Context, q listQuery) (jobList, error) {
	page := max(q.Page, 1)
	var jobs []JobView
	var err error
	switch q.State {
	case queue.StateDead:
		jobs, err = c.insp.Failed(page)
	case queue.StateReady:
		jobs, err = c.insp.Pending(q.Queue, page)
	default:
		return jobList{}, fmt.Errorf("dashboard: listing %s jobs: %w", q.State, queue.ErrUnsupported)
	}
	if err != nil {
		return jobList{}, fmt.Errorf("dashboard: listing %s jobs: %w", q.State, err)
	}
	l := jobList{Jobs: make([]JobView, len(jobs))}
	for i, j := range jobs {
		l.Jobs[i] = hide(j)
	}
	if len(jobs) >= PageSize {
		l.NextPage = page + 1
	}
	return l, nil
}

func (c cookbookSource) job(ctx context.Context, id string) (JobView, error) {
	if f, ok := c.insp.(jobFinder); ok {
		j, err := f.job(ctx, id)
		return hide(j), err
	}
	return JobView{}, fmt.Errorf("dashboard: job detail: %w", queue.ErrUnsupported)
}

func (c cookbookSource) retry(_ context.Context, id string) error  { return c.insp.Retry(id) }
func (c cookbookSource) forget(_ context.Context, id string) error { return c.insp.Forget(id) }

func (c cookbookSource) flush(context.Context, string) (int, error) {
	return -1, c.insp.FlushFailed()
}

func (c cookbookSource) setPaused(context.Context, string, bool) error {
	return fmt.Errorf("dashboard: pausing queues: %w", queue.ErrUnsupported)
}

func (c cookbookSource) workers(context.Context) ([]queue.WorkerInfo, error) {
	return nil, fmt.Errorf("dashboard: listing workers: %w", queue.ErrUnsupported)
}
