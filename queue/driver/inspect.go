package driver

import (
	"time"
)

// Inspection: the optional read side the dashboard and the CLI use. A driver
// that implements Inspector lets every replica's dashboard read the same
// numbers from the shared store. Every method is bounded: counts are exact
// up to a cap, lists page by keyset, searches have a row limit.

// JobState is where a job is in its life.
type JobState string

// The states a job can be in.
const (
	StateReady     JobState = "ready"     // waiting, available now
	StateScheduled JobState = "scheduled" // waiting for its AvailableAt (delayed or backing off)
	StateRunning   JobState = "running"   // reserved under a lease
	StateDone      JobState = "done"      // acked and kept for retention (drivers may delete instead)
	StateDead      JobState = "dead"      // a dead letter
)

// JobStates lists the states in display order.
var JobStates = []JobState{StateReady, StateScheduled, StateRunning, StateDead, StateDone, StateCancelled}

// JobInfo is a job as inspection shows it.
type JobInfo struct {
	Job
	State JobState
	// UpdatedAt is when the job last changed state (reserved, nacked, failed,
	// finished).
	UpdatedAt time.Time
	// FinishedAt is when the job was acked or dead-lettered; zero otherwise.
	FinishedAt time.Time
	// StartedAt and Worker are the start of the job's latest attempt and
	// the WorkerInfo.ID of the worker that reserved it ("" when the
	// reservation named none, see WithWorker); zero before its first
	// attempt. Drivers that do not record them leave them zero.
	StartedAt time.Time
	Worker    string
	// History lists the job's failed attempts (those that ended retried or
	// failed), oldest first: the last MaxHistory of them. GetJob fills
	// it; ListJobs leaves it nil, as do drivers that keep no history.
	History []Attempt
	// Actions lists what operators changed on the job (Controller.Amend),
	// oldest first. GetJob fills it; ListJobs leaves it nil.
	Actions []Action
}

// MaxHistory is how many failed attempts JobInfo.History keeps: the last
// ones.
const MaxHistory = 20

// Attempt is one failed attempt of a job.
type Attempt struct {
	Attempt int       // its number, 1 for the first
	Started time.Time // when it was reserved
	// Runtime is from its reservation to its outcome.
	Runtime time.Duration
	Error   string // the reason recorded with its outcome
	Worker  string // the worker that reserved it, "" when unknown
}

// Count is a count that is exact up to a cap. When More is set, the true
// count is at least N. It is data only: the dashboard and the CLI format it
// for people.
type Count struct {
	N    int64 `json:"n"`
	More bool  `json:"more,omitempty"`
	// Estimate is set when N is not exact but derived from exact totals
	// and capped parts (see QueueCounts): the true count is at most N.
	Estimate bool `json:"estimate,omitempty"`
}

// QueueStats is a queue's state now and its throughput over a recent window.
type QueueStats struct {
	Queue     string
	Paused    bool
	Ready     Count
	Scheduled Count
	Running   Count
	Dead      Count
	// Done and Cancelled are the finished jobs the store keeps (zero where
	// the driver does not read them).
	Done      Count
	Cancelled Count
	// Window is the period Processed, Failed and the runtime and wait
	// figures cover (drivers use the last hour).
	Window    time.Duration
	Processed int64 // attempts that succeeded in the window
	Failed    int64 // attempts that failed (retried or dead-lettered) in the window
	// JobsPerMinute is the recent rate of successful attempts: those of the
	// last RateWindow (the current minute and the five before it), as
	// PerMinute computes it, so a fresh burst shows at once.
	JobsPerMinute float64
	AvgRuntime    time.Duration
	MaxRuntime    time.Duration
	AvgWait       time.Duration
}

// RateWindow is how far back QueueStats.JobsPerMinute looks: the minute
// buckets from now minus RateWindow (truncated to the minute) to now.
const RateWindow = 5 * time.Minute

// PerMinute turns n attempts counted in the minute buckets of the last
// RateWindow into a rate per minute at now: the buckets span RateWindow plus
// the part of the current minute that has passed.
func PerMinute(n int64, now time.Time) float64 {
	span := RateWindow + now.Sub(now.Truncate(time.Minute))
	return float64(n) / span.Minutes()
}

// MetricPoint aggregates the attempts of one job name (RunRecord.Name, the
// job class) in one queue in one minute (or hour, from
// MetricsHistory.HourlyMetrics). Points add up: a queue's figures are the
// sums over its names, a window's over its minutes, and Runtimes merge
// bucket by bucket.
type MetricPoint struct {
	Queue string
	// Name is the job name the attempts ran; "" for attempts recorded
	// without one.
	Name         string
	Minute       time.Time // start of the minute (or hour), UTC
	Processed    int64
	Failed       int64
	TotalRuntime time.Duration
	MaxRuntime   time.Duration
	TotalWait    time.Duration
	// Runtimes counts the attempts' runtimes in log-scale buckets, from
	// which the p50 and p95 runtimes are read (RuntimeHistogram.Quantile).
	Runtimes RuntimeHistogram
}

// Add adds the attempts of o to p (a sum over queues, names or minutes;
// p keeps its own Queue, Name and Minute).
func (p *MetricPoint) Add(o MetricPoint) {
	p.Processed += o.Processed
	p.Failed += o.Failed
	p.TotalRuntime += o.TotalRuntime
	p.MaxRuntime = max(p.MaxRuntime, o.MaxRuntime)
	p.TotalWait += o.TotalWait
	p.Runtimes.Merge(&o.Runtimes)
}

// Observe adds the attempt r to p.
func (p *MetricPoint) Observe(r RunRecord) {
	if r.Outcome == OutcomeDone {
		p.Processed++
	} else {
		p.Failed++
	}
	p.TotalRuntime += r.Runtime
	p.MaxRuntime = max(p.MaxRuntime, r.Runtime)
	p.TotalWait += max(r.Wait, 0)
	p.Runtimes.Observe(r.Runtime)
}

// JobFilter selects jobs for ListJobs. Zero fields do not filter.
type JobFilter struct {
	State JobState // required
	Queue string
	Name  string
	Tag   string
	// Search matches a substring of the payload or, when it starts with
	// "payload.", field filters over JSON payloads (see ParseSearch;
	// one that does not parse fails with ErrBadSearch). Drivers bound it
	// with a row limit and, where the store allows, a statement timeout.
	Search string
	// After is the cursor from the previous page's Next; empty for the first
	// page. Any other value makes ListJobs fail with ErrBadCursor.
	After string
	// Limit caps the page; drivers apply a default (50) and a maximum (500).
	Limit int
	// Scan bounds a Search: it examines at most this many jobs of the
	// state (and queue, name and tag filters) after the cursor, in list
	// order. 0 means the driver's default: 10,000 on the SQL drivers, no
	// bound in memqueue. Drivers cap it at their default where they have
	// one, and may stop sooner to bound the call's time (the SQL drivers
	// after about 40 ms, once they examined a first window: the page's
	// size, at least 100 jobs (1,000 when the search goes on after a
	// cursor), or Scan if fewer), saying so in
	// JobPage.Scanned. Without Search it is ignored.
	Scan int
}

// JobPage is one page of ListJobs.
type JobPage struct {
	Jobs []JobInfo
	// Next is the cursor for the following page, empty on the last page.
	Next string
	// Scanned is set when a Search stopped at its row bound (Scan, or the
	// driver's default) or its time bound before it filled the page: how many jobs it
	// examined. Next then continues the search after the last of them,
	// so a caller can say "none among the N examined" and offer the next
	// N, rather than "none match". It is 0 when the search saw every
	// candidate or filled the page, and without Search.
	Scanned int
}

// WorkerInfo describes one worker process in the registry.
type WorkerInfo struct {
	ID          string
	Host        string
	PID         int
	Queues      []string
	Concurrency int
	StartedAt   time.Time
	LastSeen    time.Time
	// Running and Reserved are the jobs the worker held when it sent
	// this heartbeat, by queue name (queues with none are left out; nil
	// when it held none): Running those whose handler ran, Reserved those
	// held under a lease with no handler running (prefetched and waiting
	// for a free handler, or finished with their ack not yet flushed).
	// Together they are the worker's jobs in StateRunning. The Worker
	// reports them with every heartbeat and beats early, at most once a
	// second, when they change (see Worker), so they are at most about
	// one second old while jobs come and go and exact once the worker is
	// quiet. Drivers store them as given; the SQL drivers count a queue's
	// running jobs as their sum over the live workers (see Counter).
	Running  map[string]int
	Reserved map[string]int
	// MaxAttempts is the attempt limit the worker applies to a job that
	// carries none of its own (Job.MaxAttempts 0): the Worker's
	// MaxAttempts setting, the first attempt included. 0 when the
	// reporter did not say (a worker of a release before it reported
	// one). The dashboard's job page shows a job's limit from it.
	MaxAttempts int
}

// Held reports the jobs w held in queueName when it sent its heartbeat:
// Running plus Reserved.
func (w WorkerInfo) Held(queueName string) int { return w.Running[queueName] + w.Reserved[queueName] }

// QueueCounts is a queue's jobs by state as a Counter keeps them.
//
// Pending, Dead, Done and Cancelled are exact: the store keeps them as
// jobs change state. Ready, Scheduled and Running split Pending by time (a
// job becomes ready when its run time passes, and a running one whose
// lease expires is ready again, with no write to the store), so a driver
// may count Scheduled up to a cap: past it Scheduled carries More and
// Ready (Pending less Scheduled and Running) carries Estimate. A driver
// may take Running from what the workers report with their heartbeats
// (WorkerInfo.Running plus Reserved, summed over the workers seen within
// the registry's TTL) rather than from the jobs: it is then at most about
// a second old while jobs come and go, exact once the workers are quiet,
// and jobs leased by a process that does not report (a bare Reserve, or a
// worker that died, until their leases expire and another worker takes
// them) count as Ready.
type QueueCounts struct {
	Queue string
	// Pending is Ready + Scheduled + Running.
	Pending   int64
	Ready     Count
	Scheduled Count
	Running   Count
	Dead      int64
	Done      int64
	Cancelled int64
	// Grouped counts the group members waiting to be gathered
	// (StateGrouped); it is not part of Pending. Stores without Grouper
	// leave it zero.
	Grouped int64
	// Sequenced counts the sequence members waiting for those before them
	// (StateSequenced); it is not part of Pending. Stores without
	// Sequencer leave it zero.
	Sequenced int64
}
