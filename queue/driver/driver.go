package driver

import (
	"context"
	"time"
)

// Pusher is the one method Dispatch needs. A Queue is a Pusher; so is a
// driver's transaction-bound view (for example sqlqueue's Tx), which makes a
// dispatch part of the caller's database transaction.
type Pusher interface {
	// Push stores j as a new job. An empty ID is given a new one; an empty
	// CreatedAt is set to now. Attempts, LeaseToken and LeaseExpiresAt are
	// ignored: a pushed job has no attempts and no lease (so the job an
	// OnFailed callback received can be pushed back as it is). If j's
	// UniqueKey is held by an active job of the same queue, or j's ID is an
	// active job's in any queue, nothing is stored and the error matches
	// ErrDuplicate. Pushing the ID of a dead letter moves that job back to
	// ready with its attempts reset and the pushed fields (payload, queue,
	// availability) taken from j. The ID of a finished job may be pushed
	// again as a new job. A job beyond a limit of Validate stores nothing
	// and returns a *ValidationError matching ErrInvalid.
	Push(ctx context.Context, j Job) error
}

// BatchPusher stores many jobs in few round trips. Every Queue is one; so
// is a transaction-bound Pusher that can (sqlqueue's TxPusher).
// DispatchMany uses it when its Pusher is one.
type BatchPusher interface {
	// PushMany stores jobs with Push's rules, one decision per job: stored[i]
	// reports whether jobs[i] was stored (false: a duplicate, skipped). An
	// error means nothing is known to be stored; callers may retry, and the
	// unique keys and IDs keep a retry from storing a job twice. Every job
	// must have an ID. A batch with a job beyond a limit of Validate stores
	// nothing and returns a *ValidationError whose Index names the job.
	PushMany(ctx context.Context, jobs []Job) (stored []bool, err error)
}

// Queue is the contract every store implements: the core a Worker needs
// to run jobs. Everything else a store may do is one of a few optional
// interfaces (Inspector, Controller, Workflows, Scheduler, Reporter,
// Waiter) that CapabilitiesOf finds.
//
// # Delivery
//
// Delivery is at least once. Reserve hands a job to one consumer at a time
// under a lease; a job whose lease expires without an outcome (Complete)
// becomes reservable again without any process's help (crash recovery),
// with its attempt counted if it had started. Handlers must therefore be
// idempotent.
//
// # Leases
//
// Complete and ExtendMany present the Leases that Reserve,
// ReserveUnstarted or ReserveStarting gave. A lease is current until it expires (whether or
// not the job was reserved again since), the job gets another lease, or
// the job is no longer reserved or does not exist; for a lease that is not
// current those calls change nothing for it and report it lost (an error
// matching ErrLeaseLost, or the lease in their lost list).
//
// # Batches
//
// The calls that take many leases or jobs do the whole batch in as few
// round trips as the store allows; they answer per item (stored, lost,
// refused) and fail as a whole only when nothing is known to be done, so
// the caller may retry while the leases hold.
//
// # Jobs returned
//
// Jobs that Reserve, DeadLetters and the inspection calls return may share
// their Payload, Tags and Meta with the driver's store: callers must treat
// them as read-only.
//
// # Responsibilities
//
// Drivers store, order and lease jobs. They do not retry, back off, decode
// payloads or call handlers: the Worker does. Drivers never drop a job
// silently: a job is removed only by an outcome, Purge or ForgetDead (or a
// driver's documented retention of finished and dead jobs).
//
// # Concurrency
//
// All methods are safe for concurrent use by many goroutines and, for
// drivers that say so, many processes. Every method honours ctx; an error
// caused by ctx is returned as ctx's error (possibly wrapped). Driver errors
// are wrapped once with what was being done.
type Queue interface {
	Pusher
	BatchPusher

	// Reserve leases up to max ready jobs from the named queues for lease,
	// in order of priority (higher first), then AvailableAt, then insertion.
	// A job is ready when its AvailableAt has passed and it is not dead, not
	// finished and not held under an unexpired lease. Each returned job has
	// Attempts already incremented, a new LeaseToken and LeaseExpiresAt.
	// Reserve does not wait: with nothing ready it returns no jobs and no
	// error. An empty queues list means DefaultQueue.
	Reserve(ctx context.Context, queues []string, max int, lease time.Duration) ([]Job, error)

	// ReserveUnstarted is Reserve without counting the attempt: each
	// returned job's Attempts is as stored, and a lease that ends (expires
	// or is released) before its start is counted leaves it so. Complete
	// counts the attempt (its starts) when a handler is about to start.
	// The Worker prefetches through it: a job that waited leased in a
	// process that crashed before starting it comes back with its attempts
	// as they were, so a crash loop uses up the attempts of the jobs that
	// ran, not of those that waited beside them.
	ReserveUnstarted(ctx context.Context, queues []string, max int, lease time.Duration) ([]Job, error)

	// ReserveStarting is Reserve for handlers that start the jobs at once:
	// it counts the attempt of each job it returns, as Reserve does, except
	// a job taken back from an expired lease (Recovered), whose Attempts it
	// leaves as stored, as ReserveUnstarted does; Complete counts that one
	// when its handler is about to start. The Worker reserves through it
	// for its idle handlers, which saves each such job its start mark (a
	// round trip before the handler), and runs a recovered job apart from
	// the others of its kind, counted only as it starts, so that a crash
	// loop still uses up the attempts of the jobs that ran.
	ReserveStarting(ctx context.Context, queues []string, max int, lease time.Duration) ([]Job, error)

	// Complete records handler outcomes in as few round trips as the
	// store allows: it counts one attempt for the job under each current
	// lease of starts and records each outcome of outs whose lease is
	// current (see Completion). The Worker sends every start mark and
	// every outcome through it, batched as they come.
	//
	// lostStarts lists the leases of starts that were not current
	// (nothing counted for those). errs[i] is the result of outs[i] alone:
	// nil when it was recorded, an error matching ErrLeaseLost when its
	// lease was not current (nothing done for it), or another error when
	// the store refused that outcome (its reason text, or a push beyond a
	// limit of Validate), the others unaffected. A non-nil err means the
	// call as a whole failed and nothing is known to be recorded or
	// counted: the caller may retry while the leases hold. No lease may be
	// in both starts and outs, or twice in outs.
	Complete(ctx context.Context, starts []Lease, outs []Completion) (lostStarts []Lease, errs []error, err error)

	// ExtendMany sets the expiry of every current lease of leases to now
	// plus d (even when that is sooner than its current expiry), and
	// returns the leases that were not current. A non-nil err means the
	// batch as a whole failed and no lease is known to be extended: the
	// caller may retry while the leases hold.
	ExtendMany(ctx context.Context, leases []Lease, d time.Duration) (lost []Lease, err error)

	// DeadLetters lists up to limit dead letters of queue ("" for every
	// queue), most recently failed first. Drivers may cap limit; a limit
	// <= 0 means the driver's largest page (1,000 for the drivers in this
	// module). Page through more with Inspector.ListJobs.
	DeadLetters(ctx context.Context, queue string, limit int) ([]Job, error)

	// RetryDead moves the dead letter id back to ready, available now, with
	// attempts reset to zero. It returns ErrNotFound if id is not a dead
	// letter, and an error matching ErrDuplicate (leaving the job dead) if
	// its unique key is now held by another active job.
	RetryDead(ctx context.Context, id string) error

	// ForgetDead deletes the dead letter id. It returns ErrNotFound if id is
	// not a dead letter.
	ForgetDead(ctx context.Context, id string) error

	// FlushDead deletes every dead letter of queue ("" for every queue) and
	// reports how many it deleted.
	FlushDead(ctx context.Context, queue string) (int, error)

	// Len reports how many jobs of queue ("" for every queue) are not yet
	// finished: ready, scheduled or running. Dead letters are not counted.
	Len(ctx context.Context, queue string) (int, error)

	// Purge deletes the ready and scheduled jobs of queue ("" for every
	// queue) and reports how many it removed. Running jobs and dead letters
	// are left alone. On a store that keeps batches (Workflows), a batch's
	// waiting member is cancelled instead, so that its batch counts it; on
	// one that keeps graphs (Graphs), a graph's waiting node's job
	// likewise, cancelling the node and its dependants as a cancel does.
	Purge(ctx context.Context, queue string) (int, error)
}

// Completion is one handler outcome for Queue.Complete: what becomes of the
// job under Lease.
//
//   - OutcomeDone: acked (deleted, or kept as done for the driver's
//     retention), and Push stored with it (a chain's next step).
//   - OutcomeRetried: released for another attempt no earlier than At
//     (now if zero), with Reason as its LastError; the attempt stays
//     counted.
//   - OutcomeFailed: dead-lettered with Reason as its LastError, and Push
//     stored with it (a chain's catch job); MaxAttempts, when above 0, is
//     stored as the job's MaxAttempts: the attempt limit that applied
//     (the Worker's, for a job that carried none), so that the dead
//     letter shows it after the worker has gone. Zero leaves the job's
//     MaxAttempts as it is.
//   - OutcomeCancelled: cancelled, its unique key freed; the cancel of a
//     running job by its own handler.
//   - OutcomeSnoozed: released until At with its attempt given back
//     (Attempts goes down by one); Counted adds one to its Snoozes.
//
// The outcome and its pushes are stored together or not at all; a pushed
// job whose ID or unique key an active job holds is skipped, not an
// error. A non-empty Batch (the job's MetaBatch) also records a done,
// failed or cancelled outcome in that batch, in the same transaction as
// the job's change: the member moves by MemberTransition's rule, the
// batch's counters with it; a failure cancels the batch's pending members
// unless it allows failures; and each callback the outcome makes due
// (BatchDue) is pushed. A batch the store does not know is ignored. With
// a Batch, OutcomeDone's Push (a chain's next step, in a batch) is added
// to the batch as new members before the outcome is counted, unless the
// member was not pending or the batch was cancelled or has finished (then
// it is not pushed: the chain ends with its batch); OutcomeFailed's Push
// (a chain's catch job) is pushed as plain jobs. A store that cannot do
// so refuses chain members at PushBatch and AddToBatch with
// ErrUnsupported.
//
// A non-empty Graph (the job's MetaGraph) likewise records a done, failed
// or cancelled outcome of the job's node in that graph, in the same
// transaction, with the node transitions Graphs describes; a graph the
// store does not know is ignored.
//
// A non-empty Sequence (the job's MetaSequence) makes a done or cancelled
// outcome, and a failed one with ReleaseOnDead, release the job's
// sequence when the job is its head, in the same transaction: the next
// member becomes ready (see Sequencer). A store without Sequencer ignores
// it.
//
// A non-nil Result, with OutcomeDone, is the handler's result (at most
// MaxResultBytes, checked by the Worker): a store with Results keeps it
// for the job's ID until ResultUntil, in the same transaction as the ack,
// replacing one stored before; other outcomes and other stores ignore
// it. A nil Result costs the store nothing. The result of a node whose
// graph the store keeps, or of a member whose batch it keeps, that was
// pending (so its graph or batch runs) is kept instead until the graph or
// batch has finished, and from then for as long as ResultUntil was ahead
// of the ack: a dependant or callback reads it however long the workflow
// runs. A store may notice a graph's end later than its last node's ack
// (sqlqueue: at its next maintenance pass), never earlier.
type Completion struct {
	Lease   Lease
	Outcome Outcome
	At      time.Time
	Reason  string
	Counted bool
	Push    []Job
	Batch   string
	// Graph is the job's MetaGraph: see Graphs.
	Graph string
	// Sequence is the job's MetaSequence, and ReleaseOnDead whether its
	// dispatch said ReleaseOnDead (SequenceOf): see Sequencer.
	Sequence      string
	ReleaseOnDead bool
	// MaxAttempts is, for OutcomeFailed, the attempt limit that applied.
	MaxAttempts int
	Result      []byte
	ResultUntil time.Time
}

// RunRecord describes one finished attempt.
type RunRecord struct {
	Queue    string
	Name     string
	Start    time.Time     // when the handler started
	Runtime  time.Duration // how long the handler ran
	Wait     time.Duration // from AvailableAt (or CreatedAt) to start
	Outcome  Outcome
	Attempts int
}

// Outcome is how an attempt ended.
type Outcome int

// The outcomes of an attempt.
const (
	OutcomeDone      Outcome = iota // handler succeeded; job acked
	OutcomeRetried                  // handler failed; job nacked for a later attempt
	OutcomeFailed                   // job dead-lettered
	OutcomeCancelled                // job cancelled (by the API or its handler)
	OutcomeSnoozed                  // job snoozed; the attempt was given back
)

func (o Outcome) String() string {
	switch o {
	case OutcomeDone:
		return "done"
	case OutcomeRetried:
		return "retried"
	case OutcomeFailed:
		return "failed"
	case OutcomeCancelled:
		return "cancelled"
	case OutcomeSnoozed:
		return "snoozed"
	}
	return "unknown"
}
