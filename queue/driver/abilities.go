package driver

import (
	"context"
	"fmt"
	"time"
)

// The optional abilities of a store. A store that lacks one is still a
// complete Queue: the Worker runs its jobs, and the parts built on the
// ability (the dashboard's pages, the CLI's commands, leaders, periodic
// jobs, batches) say that the store lacks it instead of failing. A store
// implements an ability whole or not at all; CapabilitiesOf finds which.

// Inspector is the read side of a store: the dashboard, the CLI, the
// metrics exporters and alerts read through it. A store that implements it
// lets every replica's dashboard read the same numbers from the shared
// store. Every method is bounded: counts are exact up to a cap, lists page
// by keyset, searches have a row limit.
type Inspector interface {
	// QueueStats returns one entry per known queue (any queue with jobs, a
	// pause or metrics in the window), sorted by name.
	QueueStats(ctx context.Context) ([]QueueStats, error)
	// Metrics returns per-minute points from since to now, oldest first.
	Metrics(ctx context.Context, since time.Time) ([]MetricPoint, error)
	// ListJobs returns one page of jobs in f.State matching f.
	ListJobs(ctx context.Context, f JobFilter) (JobPage, error)
	// GetJob returns the job id in whatever state it is, or ErrNotFound.
	GetJob(ctx context.Context, id string) (JobInfo, error)
	// Counts returns the per-queue counts of jobs by state that the store
	// keeps (see QueueCounts), one entry per queue holding jobs in any
	// state, sorted by name. The store keeps them as jobs change state,
	// so reading them costs one row per queue and state whatever the
	// number of jobs.
	Counts(ctx context.Context) ([]QueueCounts, error)
	// DeadSince counts the dead letters of every queue whose FinishedAt
	// (when they were dead-lettered) is at or after since: the dashboard's
	// "failed in the past 7 days". It is one bounded read: a store may
	// count up to a cap and set Count.More.
	DeadSince(ctx context.Context, since time.Time) (Count, error)
	// OldestReady returns, for each queue with ready jobs, the earliest
	// time one of its ready jobs became available (its AvailableAt, or
	// CreatedAt when AvailableAt is zero): metrics and alerts report the
	// oldest ready job's age from it. Queues without ready jobs are
	// absent. It is one bounded read.
	OldestReady(ctx context.Context) (map[string]time.Time, error)
	// Workers lists the worker processes that reported (Reporter.Heartbeat)
	// recently, sorted by ID; a store that keeps no registry returns none.
	Workers(ctx context.Context) ([]WorkerInfo, error)
}

// Controller is a store whose jobs and queues can be acted on from any
// process that shares it: pause and resume, cancel, and bulk actions.
type Controller interface {
	// Pause makes Reserve skip queue's jobs until Resume. Pauses are
	// shared by every process that uses the same store.
	Pause(ctx context.Context, queue string) error
	// Resume undoes Pause.
	Resume(ctx context.Context, queue string) error
	// Paused lists the paused queues.
	Paused(ctx context.Context) ([]string, error)

	// Cancel cancels the active job id. A ready or scheduled job (new or
	// waiting to be retried) becomes StateCancelled at once and never runs.
	// A running job becomes StateCancelled in the store at once as well:
	// its lease is then lost (Complete and ExtendMany report it lost), and
	// the process that runs it learns of the cancel through CancelledSince
	// and cancels its handler's context. Either way the job's unique key
	// is freed. Cancel returns the state the job was in, ErrNotFound when
	// no job has that ID, and ErrFinished when it has already finished.
	Cancel(ctx context.Context, id string) (JobState, error)
	// CancelledSince returns the leases of jobs cancelled while running at
	// or after since (by the cancelling process's clock), so a worker can
	// stop the handlers it runs for them. Stores may return more (older
	// cancels); callers match the leases they hold.
	CancelledSince(ctx context.Context, since time.Time) ([]Lease, error)

	// ActOn applies a to at most limit jobs that match f, in ListJobs'
	// order, with one set-based statement per chunk of jobs rather than
	// one call per job, and returns how many it changed. f.State must be a
	// state a is Valid for (CheckBulk); f.After, f.Limit and f.Scan are
	// ignored. A payload search (f.Search) examines the jobs a chunk at a
	// time with ListJobs' bounds and goes on until limit jobs changed or
	// none are left. Jobs that leave the state meanwhile are skipped, not
	// errors. On an error, the count says how many changed before it.
	// When rec.What is not empty, each dead letter BulkRetry moves back
	// records rec in its history (JobInfo.Actions), in the statement or
	// script that moves it, as Amend records its changes.
	ActOn(ctx context.Context, f JobFilter, a BulkAction, limit int, rec Action) (int, error)
	// Amend changes the job id as a says (AmendRetry, AmendRunNow,
	// AmendNote) in
	// one atomic step with the check of its state, and records a.Action
	// in its history (JobInfo.Actions, the last MaxHistory entries with
	// its failed attempts). It returns the state the job was in, an error
	// matching ErrNotFound when no job has that ID (or the store no longer
	// keeps it), ErrJobState when the job's state refuses the change, and
	// ErrDuplicate when a retried job's unique key is held by another
	// active job; then nothing changed.
	Amend(ctx context.Context, id string, a Amendment) (JobState, error)
	// CountJobs counts the jobs that match f, exact up to limit (More set
	// beyond it), for a bulk action's confirmation. With f.Search it
	// counts the matches among the jobs one bounded search examines, and
	// sets More when that bound was reached. f.After, f.Limit and f.Scan
	// are ignored.
	CountJobs(ctx context.Context, f JobFilter, limit int) (Count, error)
}

// Workflows is a store that keeps batches (see queue.Batch): a batch's
// record, its members and its callbacks. A member's outcome reaches its
// batch through Complete (Completion.Batch). Chains need no ability of
// their own: their next step rides in Completion.Push.
type Workflows interface {
	BatchDispatcher
	// AddToBatch pushes jobs (each carrying MetaBatch = id) as new members
	// of batch id, with PushBatch's rules. It returns ErrNotFound for an
	// unknown batch and ErrBatchClosed for one that has finished or was
	// cancelled.
	AddToBatch(ctx context.Context, id string, jobs []Job) (stored int, err error)
	// CancelBatch cancels batch id: it marks the batch cancelled and
	// cancels every member not yet finished (a running one as
	// Controller.Cancel does), pushing Finally if that finishes the batch.
	// Cancelling a batch again, or one that has finished, changes nothing.
	// It returns the batch as it is afterwards, or ErrNotFound.
	CancelBatch(ctx context.Context, id string) (BatchInfo, error)
	// GetBatch reads batch id, or returns ErrNotFound.
	GetBatch(ctx context.Context, id string) (BatchInfo, error)
	// ListBatches pages through the batches, newest first.
	ListBatches(ctx context.Context, f BatchFilter) (BatchPage, error)
	// BatchMembers pages through batch id's members that f selects, in
	// job ID order, or returns ErrNotFound.
	BatchMembers(ctx context.Context, id string, f MemberFilter) (MemberPage, error)
}

// Results is a store that keeps job results (queue.SetResult) apart from
// their jobs: Complete stores a done job's Completion.Result, and it is
// kept until its ResultUntil (a graph's node or batch's member: until its
// workflow has finished, and that much longer; see Completion), whatever
// becomes of the job (deleted at its ack, or kept as done for a retention
// of the store's). The maintenance that prunes finished jobs prunes
// results past their time.
type Results interface {
	// Result returns the result stored for job id, or an error matching
	// ErrNotFound when there is none: the job has not succeeded (yet),
	// succeeded without a result, or its result's time has passed.
	Result(ctx context.Context, id string) ([]byte, error)
}

// Scheduler is a store that holds named leases and periodic jobs' ticks:
// what leader election (queue.Leader), limits (queue.Limiter) and periodic
// jobs need so that every process sharing the store agrees.
//
// Named leases allow at most one holder per name at a time, until the
// lease's expiry. Expiries are computed from the calling process's clock:
// clocks of the processes that share a store must agree to well within a
// TTL.
type Scheduler interface {
	// AcquireLease takes the lease name for holder until now plus ttl when
	// it is free or expired, or renews it when holder already holds it. It
	// reports whether holder holds the lease after the call.
	AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (bool, error)
	// AcquireLeaseEpoch is AcquireLease that also returns the lease's
	// epoch, the fencing token of its terms (see Fence), when holder holds
	// the lease after the call (0 when not). The epoch of a name starts
	// above 0 and grows each time the lease passes to a holder that did
	// not hold it live: from another holder, or after it expired or was
	// released. A renewal of a live lease by its holder keeps it. Epochs
	// never go down, and a store that checks fenced writes (see
	// WithFence) refuses those whose epoch is not the lease's.
	AcquireLeaseEpoch(ctx context.Context, name, holder string, ttl time.Duration) (epoch int64, held bool, err error)
	// ReleaseLease gives up the lease name if holder holds it, so another
	// holder may take it at once. Releasing a lease one does not hold is
	// not an error.
	ReleaseLease(ctx context.Context, name, holder string) error

	// RegisterPeriodic creates the record p.Name with p's fields when it
	// does not exist (not paused), and otherwise updates its Schedule,
	// NextTick and Template, keeping its LastTick and Paused. Either way
	// it sets Seen to now. It returns the record's LastTick.
	RegisterPeriodic(ctx context.Context, p PeriodicInfo) (last time.Time, err error)
	// ClaimTick records the tick p.LastTick of periodic p.Name and pushes
	// j, both or neither, if the record's LastTick is before p.LastTick
	// and the record is not paused; it then sets NextTick, Seen and
	// LastJobID (j's ID, or "" when j was a duplicate and skipped). It
	// reports false, changing nothing, when the tick was already claimed
	// or the record is paused. The record must exist.
	ClaimTick(ctx context.Context, p PeriodicInfo, j Job) (claimed bool, err error)
	// PausePeriodic sets the record name's Paused, in every process that
	// shares the store and across restarts. It returns an error matching
	// ErrNotFound when no worker ever registered name.
	PausePeriodic(ctx context.Context, name string, paused bool) error
	// Periodics lists the periodic jobs' records, sorted by name.
	Periodics(ctx context.Context) ([]PeriodicInfo, error)
}

// Reporter is a store that keeps what Workers report about themselves:
// a registry of worker processes (read back by Inspector.Workers) and
// per-run metrics (read back by Inspector.Metrics and QueueStats).
type Reporter interface {
	// Heartbeat creates or refreshes the entry w.ID, setting LastSeen.
	// Entries not seen for a while are dropped by the store.
	Heartbeat(ctx context.Context, w WorkerInfo) error
	// Deregister removes the entry id.
	Deregister(ctx context.Context, id string) error
	// ObserveRun records one finished attempt. Stores persist it with
	// their next write; the call itself must not block on I/O.
	ObserveRun(r RunRecord)
}

// Waiter is a store that can block until a job may be ready, so the Worker
// does not poll. memqueue wakes waiters on Push; the PostgreSQL extras wake
// them with LISTEN/NOTIFY.
type Waiter interface {
	// Wait returns nil when a job may have become ready on one of queues or
	// when max has elapsed, whichever comes first, and ctx's error when ctx
	// is done. A spurious wake-up is allowed; a missed one is not, within
	// max.
	Wait(ctx context.Context, queues []string, max time.Duration) error
}

// LeaseDefaulter is a store that has a configured lease length (sqlqueue's
// WithVisibilityTimeout). A Worker with no Lease setting reserves for that
// long.
type LeaseDefaulter interface {
	DefaultLease() time.Duration
}

// Capabilities is what a store can do beyond the core Queue: each field is
// the store as that ability, nil when it lacks it. CapabilitiesOf fills it
// in with one look at the store, so its users test a field instead of
// asserting interfaces, and say what is missing with Missing or Require.
type Capabilities struct {
	Inspector  Inspector
	Controller Controller
	Workflows  Workflows
	Graphs     Graphs
	Results    Results
	Scheduler  Scheduler
	Reporter   Reporter
	Waiter     Waiter
	Fleet      Fleet
	History    MetricsHistory
	Tags       TagMonitor
	Groups     Grouper
	Sequences  Sequencer
	// DefaultLease is the store's configured lease length, 0 when it has
	// none (see LeaseDefaulter).
	DefaultLease time.Duration
}

// CapabilitiesOf returns what q can do beyond the core Queue.
func CapabilitiesOf(q Queue) Capabilities {
	var c Capabilities
	c.Inspector, _ = q.(Inspector)
	c.Controller, _ = q.(Controller)
	c.Workflows, _ = q.(Workflows)
	c.Graphs, _ = q.(Graphs)
	c.Results, _ = q.(Results)
	c.Scheduler, _ = q.(Scheduler)
	c.Reporter, _ = q.(Reporter)
	c.Waiter, _ = q.(Waiter)
	c.Fleet, _ = q.(Fleet)
	c.History, _ = q.(MetricsHistory)
	c.Tags, _ = q.(TagMonitor)
	c.Groups, _ = q.(Grouper)
	c.Sequences, _ = q.(Sequencer)
	if d, ok := q.(LeaseDefaulter); ok {
		c.DefaultLease = d.DefaultLease()
	}
	return c
}

// abilities names each ability and what goes without it, in the order
// Missing reports them.
var abilities = []struct {
	name, without string
	has           func(Capabilities) bool
}{
	{"Inspector", "no figures, job lists, job detail, counts or workers", func(c Capabilities) bool { return c.Inspector != nil }},
	{"Controller", "no pause, cancel or bulk actions", func(c Capabilities) bool { return c.Controller != nil }},
	{"Workflows", "no batches", func(c Capabilities) bool { return c.Workflows != nil }},
	{"Graphs", "no workflow graphs", func(c Capabilities) bool { return c.Graphs != nil }},
	{"Results", "handlers' results are dropped; nothing to wait for", func(c Capabilities) bool { return c.Results != nil }},
	{"Scheduler", "no leaders, limits or periodic jobs", func(c Capabilities) bool { return c.Scheduler != nil }},
	{"Reporter", "no worker registry or run metrics", func(c Capabilities) bool { return c.Reporter != nil }},
	{"Waiter", "workers poll", func(c Capabilities) bool { return c.Waiter != nil }},
	{"Fleet", "no fleet commands: workers cannot be terminated, paused or continued through the store", func(c Capabilities) bool { return c.Fleet != nil }},
	{"MetricsHistory", "run metrics for the last hour only, no 24-hour or 7-day views", func(c Capabilities) bool { return c.History != nil }},
	{"TagMonitor", "no monitored tags", func(c Capabilities) bool { return c.Tags != nil }},
	{"Grouper", "no group aggregation: grouped jobs are refused at dispatch", func(c Capabilities) bool { return c.Groups != nil }},
	{"Sequencer", "no sequences: sequence members are refused at dispatch", func(c Capabilities) bool { return c.Sequences != nil }},
}

// Missing lists the abilities the store lacks, each as its interface's
// name and what goes without it ("Workflows: no batches"); none for a
// store that has them all.
func (c Capabilities) Missing() []string {
	var out []string
	for _, a := range abilities {
		if !a.has(c) {
			out = append(out, a.name+": "+a.without)
		}
	}
	return out
}

// Require returns nil when the store has the ability named (an interface
// of this package: "Inspector", "Controller", "Workflows", "Graphs", "Results", "Scheduler",
// "Reporter", "Waiter", "Fleet", "MetricsHistory", "TagMonitor", "Grouper" or "Sequencer"), and otherwise an error matching ErrUnsupported
// that names it and what goes without it.
func (c Capabilities) Require(name string) error {
	for _, a := range abilities {
		if a.name == name {
			if a.has(c) {
				return nil
			}
			return fmt.Errorf("queue: the store has no %s (%s): %w", name, a.without, ErrUnsupported)
		}
	}
	return fmt.Errorf("queue: no ability named %q: %w", name, ErrUnsupported)
}
