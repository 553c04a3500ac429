package dashboard

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// QueueInspector is the Source of a queue driver: every figure and list
// comes from the driver, so every replica that shares the driver's store
// shows the same numbers. Build one with ForQueue and pass it to Handler.
// It is also an Inspector (the cookbook's interface, for a Sampler or a
// program's own reads).
//
// The driver's abilities (driver.CapabilitiesOf) decide what the dashboard
// offers: its Inspector gives the overview figures, charts, job lists,
// search, job detail and the workers page; its Controller gives pause and
// resume, cancel and the "all matching" actions; its Scheduler the
// periodic page; its Workflows the batches pages. A driver without an
// Inspector still gets the failed list (through DeadLetters) with retry,
// forget and flush.
//
// Figures and Metrics share one read between concurrent callers and reuse
// it for statsTTL, so however many dashboards are open on one
// QueueInspector the store answers at most one QueueStats and one Metrics
// call per interval; its actions drop the shared read so their result shows
// at once. Stats, the Inspector method, always reads the driver.
//
// QueueInspector is safe for concurrent use as the driver is. Its Inspector
// methods, which take no context, use context.Background().
type QueueInspector struct {
	q      queue.Queue
	insp   driver.Inspector  // nil when the driver cannot inspect
	ctl    driver.Controller // nil when it cannot pause, cancel or act in bulk
	sched  driver.Scheduler  // nil when it keeps no periodic jobs
	wf     driver.Workflows  // nil when it keeps no batches
	graphs driver.Graphs     // nil when it keeps no graphs
	fleet  driver.Fleet      // nil when it carries no fleet commands
	tags   driver.TagMonitor // nil when it monitors no tags
	groups bool              // the store has driver.Grouper
	seq    driver.Sequencer  // nil when it keeps no sequences

	indexed shared[bool] // whether the payload search index is on (SearchIndexed)

	figures shared[StatsView]
	points  shared[[]driver.MetricPoint]
	hourly  shared[[]driver.MetricPoint]

	lastMu sync.Mutex
	last   StatsView // the last figures read, served marked stale when a read fails
}

// ForQueue returns the Source (and Inspector) over the driver q. It panics
// if q is nil.
func ForQueue(q queue.Queue) *QueueInspector {
	if q == nil {
		panic("dashboard: ForQueue given a nil queue")
	}
	caps := driver.CapabilitiesOf(q)
	return &QueueInspector{q: q, insp: caps.Inspector, ctl: caps.Controller, sched: caps.Scheduler, wf: caps.Workflows, graphs: caps.Graphs, fleet: caps.Fleet, tags: caps.Tags, groups: caps.Groups != nil, seq: caps.Sequences}
}

// Abilities follow the driver's capabilities: its Inspector gives
// browsing, figures by state, charts, job detail and the workers page; its
// Controller pause and resume, the cancel buttons and the job actions
// (with the Inspector); its Scheduler the
// periodic page; its Workflows the batches pages; its Graphs the graphs
// pages; its Fleet the Workers
// page's terminate, pause and continue buttons; its TagMonitor the Tags
// pages; its Grouper (with the Inspector) the job list's grouped tab;
// its Sequencer the Sequences page.
func (qi *QueueInspector) Abilities() Abilities {
	ok := qi.insp != nil
	return Abilities{
		Browse: ok, ByState: ok, Shared: true, Charts: ok, Runtime: ok, Detail: ok,
		Pause: qi.ctl != nil, Workers: ok,
		Cancel: qi.ctl != nil, Periodic: qi.sched != nil, Batches: qi.wf != nil, Graphs: qi.graphs != nil, Fleet: qi.fleet != nil && ok,
		Amend:     qi.ctl != nil && ok,
		Tags:      qi.tags != nil,
		Groups:    qi.groups && ok,
		Sequences: qi.seq != nil,
	}
}

// Figures returns the driver's figures, shared for statsTTL. Figures up
// to figuresMaxAge old are returned at once while a read in the
// background replaces them (none after an action: then the caller waits
// for the read). When the read fails (a slow store hits the request's
// deadline) and an earlier one succeeded, it returns that one marked
// Stale rather than the error.
func (qi *QueueInspector) Figures(ctx context.Context) (StatsView, error) {
	sv, err := qi.figures.getRecent(ctx, statsTTL, figuresMaxAge, qi.stats)
	qi.lastMu.Lock()
	defer qi.lastMu.Unlock()
	if err != nil {
		if qi.last.At.IsZero() {
			return sv, err
		}
		last := qi.last
		last.Stale = true
		return last, nil
	}
	if sv.At.After(qi.last.At) {
		qi.last = sv
	}
	return sv, nil
}

// figuresMaxAge is how old the figures Figures returns at once, while it
// refreshes them, may be.
const figuresMaxAge = 15 * time.Second

// Metrics returns the driver's per-minute points since since, shared for
// statsTTL: the dashboard always asks for about the same window.
func (qi *QueueInspector) Metrics(ctx context.Context, since time.Time) ([]driver.MetricPoint, error) {
	return qi.points.get(ctx, statsTTL, func(ctx context.Context) ([]driver.MetricPoint, error) {
		return qi.metrics(ctx, since)
	})
}

// HourlyMetrics returns the driver's hourly points since since (at most
// driver.MetricsRetention back), read for the whole retention and shared
// for statsTTL, so the 24-hour and 7-day views share one read. It fails
// with an error wrapping queue.ErrUnsupported when the driver lacks the
// MetricsHistory ability.
func (qi *QueueInspector) HourlyMetrics(ctx context.Context, since time.Time) ([]driver.MetricPoint, error) {
	hist, ok := qi.insp.(driver.MetricsHistory)
	if !ok || qi.insp == nil {
		return nil, fmt.Errorf("dashboard: reading hourly metrics: the driver keeps the last hour only: %w", queue.ErrUnsupported)
	}
	pts, err := qi.hourly.get(ctx, statsTTL, func(ctx context.Context) ([]driver.MetricPoint, error) {
		pts, err := hist.HourlyMetrics(ctx, time.Now().Add(-driver.MetricsRetention))
		if err != nil {
			return nil, fmt.Errorf("dashboard: reading hourly metrics: %w", err)
		}
		return pts, nil
	})
	if err != nil {
		return nil, err
	}
	from := since.Truncate(time.Hour)
	i, _ := slices.BinarySearchFunc(pts, from, func(p driver.MetricPoint, t time.Time) int { return p.Minute.Compare(t) })
	return pts[i:], nil
}

// changed drops the shared reads after an action.
func (qi *QueueInspector) changed() {
	qi.figures.reset()
	qi.points.reset()
}

// List returns a keyset page from the driver; a driver that cannot inspect
// serves its failed jobs by page number through DeadLetters.
func (qi *QueueInspector) List(ctx context.Context, q ListQuery) (JobList, error) {
	if qi.insp == nil {
		return listByPage(q, func(page int) ([]JobView, error) {
			return qi.pageAt(ctx, driver.JobFilter{Queue: q.Queue}, []driver.JobState{queue.StateDead}, page)
		}, func(name string, page int) ([]JobView, error) {
			return qi.pageAt(ctx, driver.JobFilter{Queue: name}, []driver.JobState{queue.StateReady, queue.StateScheduled}, page)
		})
	}
	p, err := qi.listJobs(ctx, driver.JobFilter{
		State: q.State, Queue: q.Queue, Name: q.Name, Tag: q.Tag, Search: q.Search,
		After: q.After, Limit: q.Limit,
	})
	if err != nil {
		return JobList{}, err
	}
	return JobList{Jobs: p.Jobs, Next: p.Next, Scanned: p.Scanned}, nil
}

// Job reads the job id from the driver.
func (qi *QueueInspector) Job(ctx context.Context, id string) (JobView, error) {
	return qi.job(ctx, id)
}

// RetryJob moves the dead letter id back to ready.
func (qi *QueueInspector) RetryJob(ctx context.Context, id string) error {
	defer qi.changed()
	return qi.retry(ctx, id)
}

// ForgetJob deletes the dead letter id.
func (qi *QueueInspector) ForgetJob(ctx context.Context, id string) error {
	defer qi.changed()
	return qi.forget(ctx, id)
}

// Flush deletes the dead letters of queueName ("" for all).
func (qi *QueueInspector) Flush(ctx context.Context, queueName string) (int, error) {
	defer qi.changed()
	return qi.flush(ctx, queueName)
}

// SetPaused pauses or resumes queueName through driver.Controller.
func (qi *QueueInspector) SetPaused(ctx context.Context, queueName string, paused bool) error {
	defer qi.changed()
	return qi.setPaused(ctx, queueName, paused)
}

// CancelJob cancels the job id through driver.Controller.
func (qi *QueueInspector) CancelJob(ctx context.Context, id string) (driver.JobState, error) {
	defer qi.changed()
	was, err := queue.CancelJob(ctx, qi.q, id)
	if err != nil {
		return "", fmt.Errorf("dashboard: cancelling job %s: %w", id, err)
	}
	return was, nil
}

// Periodics lists the driver's periodic jobs through driver.Scheduler.
func (qi *QueueInspector) Periodics(ctx context.Context) ([]driver.PeriodicInfo, error) {
	if qi.sched == nil {
		return nil, fmt.Errorf("dashboard: listing periodic jobs: %w", queue.ErrUnsupported)
	}
	ps, err := qi.sched.Periodics(ctx)
	if err != nil {
		return nil, fmt.Errorf("dashboard: listing periodic jobs: %w", err)
	}
	return ps, nil
}

// Workers lists the driver's worker registry.
func (qi *QueueInspector) Workers(ctx context.Context) ([]driver.WorkerInfo, error) {
	return qi.workerList(ctx)
}

// maxOffsetRows bounds how deep the page-numbered methods (Pending, Failed)
// walk a driver's keyset pages: 200 pages of PageSize rows.
const maxOffsetRows = 200 * PageSize

// errTooDeep is returned for a page number past maxOffsetRows.
var errTooDeep = fmt.Errorf("dashboard: page too deep for page numbers (more than %d rows); use the dashboard's keyset pages", maxOffsetRows)

// Stats returns the driver's per-queue figures. Pending is ready plus
// scheduled; Throughput is the driver's jobs per minute over 60.
func (qi *QueueInspector) Stats() (StatsView, error) { return qi.stats(context.Background()) }

func (qi *QueueInspector) stats(ctx context.Context) (StatsView, error) {
	sv := StatsView{At: time.Now(), Processes: -1}
	if qi.insp == nil {
		n, err := qi.q.Len(ctx, "")
		if err != nil {
			return sv, fmt.Errorf("dashboard: reading queue length: %w", err)
		}
		sv.Totals.Queue = "all"
		sv.Totals.Pending = int64(n)
		sv.Totals.Ready = driver.Count{N: int64(n)}
		return sv, nil
	}
	qss, err := qi.insp.QueueStats(ctx)
	if err != nil {
		return sv, fmt.Errorf("dashboard: reading queue stats: %w", err)
	}
	sv.Queues = make([]QueueStats, len(qss))
	for i, s := range qss {
		sv.Queues[i] = QueueStats{
			QueueStats: s,
			Pending:    s.Ready.N + s.Scheduled.N,
			Throughput: s.JobsPerMinute / 60,
		}
	}
	qi.addWaits(ctx, &sv)
	sv.Totals = totals(sv.Queues)
	return sv, nil
}

// failedWindow is how far back StatsView.FailedPastWeek counts.
const failedWindow = 7 * 24 * time.Hour

// addWaits adds the figures beside the counts: each queue's oldest ready
// job, the dead letters of the past week, the number of live processes
// and the queues with ready jobs that none of them serves.
// They are extras: a failed read leaves them out rather than failing the
// figures.
func (qi *QueueInspector) addWaits(ctx context.Context, sv *StatsView) {
	sv.Processes = -1
	if oldest, err := qi.insp.OldestReady(ctx); err == nil {
		for i := range sv.Queues {
			sv.Queues[i].OldestReady = oldest[sv.Queues[i].Queue]
		}
	}
	if n, err := qi.insp.DeadSince(ctx, sv.At.Add(-failedWindow)); err == nil {
		sv.FailedPastWeek = &n
	}
	ws, err := qi.insp.Workers(ctx)
	if err != nil {
		return
	}
	sv.Processes = len(ws)
	served, all := map[string]bool{}, false
	for _, w := range ws {
		all = all || len(w.Queues) == 0 // a worker that names no queue: assume it serves any
		for _, q := range w.Queues {
			served[q] = true
		}
	}
	for i := range sv.Queues {
		q := &sv.Queues[i]
		q.Unserved = q.Ready.N > 0 && !q.Paused && !all && !served[q.Queue]
	}
}

// Pending returns page (1-based) of queue's waiting jobs: ready ones first,
// then scheduled ones. Pages past 200 return an error; the dashboard's own
// pages use keyset cursors instead.
func (qi *QueueInspector) Pending(queueName string, page int) ([]JobView, error) {
	return qi.pageAt(context.Background(), driver.JobFilter{Queue: queueName}, []driver.JobState{queue.StateReady, queue.StateScheduled}, page)
}

// Failed returns page (1-based) of the dead letters, most recent first as
// the driver orders them. Pages past 200 return an error.
func (qi *QueueInspector) Failed(page int) ([]JobView, error) {
	return qi.pageAt(context.Background(), driver.JobFilter{}, []driver.JobState{queue.StateDead}, page)
}

// pageAt turns a page number into keyset walks over states in turn,
// reading at most maxOffsetRows+PageSize rows.
func (qi *QueueInspector) pageAt(ctx context.Context, f driver.JobFilter, states []driver.JobState, page int) ([]JobView, error) {
	page = max(page, 1)
	skip := (page - 1) * PageSize
	if skip > maxOffsetRows {
		return nil, errTooDeep
	}
	if qi.insp == nil {
		if len(states) != 1 || states[0] != queue.StateDead {
			return nil, fmt.Errorf("dashboard: listing %s jobs: %w", states[0], queue.ErrUnsupported)
		}
		jobs, err := qi.q.DeadLetters(ctx, f.Queue, skip+PageSize)
		if err != nil {
			return nil, fmt.Errorf("dashboard: listing dead letters: %w", err)
		}
		var out []JobView
		for _, j := range jobs[min(skip, len(jobs)):] {
			out = append(out, JobView{Job: j, State: queue.StateDead})
		}
		return out, nil
	}
	var out []JobView
	for _, st := range states {
		f.State, f.After = st, ""
		for {
			f.Limit = min(500, skip+PageSize-len(out))
			p, err := qi.insp.ListJobs(ctx, f)
			if err != nil {
				return nil, fmt.Errorf("dashboard: listing %s jobs: %w", st, err)
			}
			jobs := p.Jobs
			n := min(skip, len(jobs))
			skip -= n
			out = append(out, jobs[n:]...)
			if len(out) >= PageSize {
				return out[:PageSize], nil
			}
			if p.Next == "" || len(jobs) == 0 {
				break
			}
			f.After = p.Next
		}
	}
	return out, nil
}

// Retry moves the dead letter id back to ready (queue.Queue.RetryDead).
func (qi *QueueInspector) Retry(id string) error { return qi.retry(context.Background(), id) }

func (qi *QueueInspector) retry(ctx context.Context, id string) error {
	if err := qi.q.RetryDead(ctx, id); err != nil {
		return fmt.Errorf("dashboard: retrying job %s: %w", id, err)
	}
	return nil
}

// Forget deletes the dead letter id (queue.Queue.ForgetDead).
func (qi *QueueInspector) Forget(id string) error { return qi.forget(context.Background(), id) }

func (qi *QueueInspector) forget(ctx context.Context, id string) error {
	if err := qi.q.ForgetDead(ctx, id); err != nil {
		return fmt.Errorf("dashboard: forgetting job %s: %w", id, err)
	}
	return nil
}

// FlushFailed deletes every dead letter (queue.Queue.FlushDead).
func (qi *QueueInspector) FlushFailed() error {
	_, err := qi.flush(context.Background(), "")
	return err
}

func (qi *QueueInspector) flush(ctx context.Context, queueName string) (int, error) {
	n, err := qi.q.FlushDead(ctx, queueName)
	if err != nil {
		return n, fmt.Errorf("dashboard: flushing dead letters: %w", err)
	}
	return n, nil
}

// errNoInspect reports a page that needs driver.Inspector.
var errNoInspect = fmt.Errorf("dashboard: this driver cannot be inspected: %w", queue.ErrUnsupported)

func (qi *QueueInspector) listJobs(ctx context.Context, f driver.JobFilter) (driver.JobPage, error) {
	if qi.insp == nil {
		if f.State != queue.StateDead || f.After != "" {
			return driver.JobPage{}, errNoInspect
		}
		jobs, err := qi.q.DeadLetters(ctx, f.Queue, PageSize)
		if err != nil {
			return driver.JobPage{}, fmt.Errorf("dashboard: listing dead letters: %w", err)
		}
		var p driver.JobPage
		for _, j := range jobs {
			p.Jobs = append(p.Jobs, JobView{Job: j, State: queue.StateDead})
		}
		return p, nil
	}
	p, err := qi.insp.ListJobs(ctx, f)
	if err != nil {
		return p, fmt.Errorf("dashboard: listing %s jobs: %w", f.State, err)
	}
	return p, nil
}

func (qi *QueueInspector) job(ctx context.Context, id string) (JobView, error) {
	if qi.insp == nil {
		return JobView{}, errNoInspect
	}
	j, err := qi.insp.GetJob(ctx, id)
	if err != nil {
		return j, fmt.Errorf("dashboard: reading job %s: %w", id, err)
	}
	return j, nil
}

func (qi *QueueInspector) metrics(ctx context.Context, since time.Time) ([]driver.MetricPoint, error) {
	if qi.insp == nil {
		return nil, errNoInspect
	}
	pts, err := qi.insp.Metrics(ctx, since)
	if err != nil {
		return nil, fmt.Errorf("dashboard: reading metrics: %w", err)
	}
	return pts, nil
}

func (qi *QueueInspector) setPaused(ctx context.Context, queueName string, paused bool) error {
	if qi.ctl == nil {
		return fmt.Errorf("dashboard: pausing queues: %w", queue.ErrUnsupported)
	}
	var err error
	if paused {
		err = qi.ctl.Pause(ctx, queueName)
	} else {
		err = qi.ctl.Resume(ctx, queueName)
	}
	if err != nil {
		return fmt.Errorf("dashboard: pausing or resuming queue %s: %w", queueName, err)
	}
	return nil
}

func (qi *QueueInspector) workerList(ctx context.Context) ([]driver.WorkerInfo, error) {
	if qi.insp == nil {
		return nil, fmt.Errorf("dashboard: listing workers: %w", queue.ErrUnsupported)
	}
	ws, err := qi.insp.Workers(ctx)
	if err != nil {
		return nil, fmt.Errorf("dashboard: listing workers: %w", err)
	}
	return ws, nil
}

// isNotFound reports whether err means the id is unknown.
func isNotFound(err error) bool { return errors.Is(err, ErrNotFound) }
