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

// Queue is the contract every driver implements. The Worker and the typed
// helpers (Dispatch, Handle) know only this interface and the optional ones
// below.
//
// # Delivery
//
// Delivery is at least once. Reserve hands a job to one consumer at a time
// under a lease; a job whose lease expires without an Ack, Nack or Fail
// becomes reservable again without any process's help (crash recovery), with
// its attempt already counted. Handlers must therefore be idempotent.
//
// # Leases
//
// Ack, Nack, Fail and Extend present the Lease that Reserve gave. If that
// lease has expired (whether or not the job was reserved again since), if
// the job's current lease is another one, or if the job is no longer
// reserved or does not exist, the call changes nothing and returns
// ErrLeaseLost.
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
// silently: a job is removed only by Ack, Purge or ForgetDead (or a
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

	// Reserve leases up to max ready jobs from the named queues for lease,
	// in order of priority (higher first), then AvailableAt, then insertion.
	// A job is ready when its AvailableAt has passed and it is not dead, not
	// finished and not held under an unexpired lease. Each returned job has
	// Attempts already incremented, a new LeaseToken and LeaseExpiresAt.
	// Reserve does not wait: with nothing ready it returns no jobs and no
	// error. An empty queues list means DefaultQueue.
	Reserve(ctx context.Context, queues []string, max int, lease time.Duration) ([]Job, error)

	// Ack marks the job under l as done; a driver may delete it or keep it
	// as finished for its retention period.
	Ack(ctx context.Context, l Lease) error

	// Nack releases the job under l for another attempt no earlier than
	// retryAt, recording reason as its LastError. The attempt stays counted.
	Nack(ctx context.Context, l Lease, retryAt time.Time, reason string) error

	// Fail moves the job under l to the dead letters with reason as its
	// LastError. It is never reserved again unless retried.
	Fail(ctx context.Context, l Lease, reason string) error

	// Extend sets the lease l's expiry to now plus d (even when that is
	// sooner than its current expiry).
	Extend(ctx context.Context, l Lease, d time.Duration) error

	// Complete records handler outcomes in as few round trips as the
	// store allows: it counts one attempt for the job under each current
	// lease of starts (as Starter.Start does) and records each outcome of
	// outs whose lease is current (see Completion). The Worker sends every
	// outcome through it, batched as they come.
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
	// are left alone. On a store that keeps batches (Batcher), a batch's
	// waiting member is cancelled instead, so that its batch counts it.
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
//     stored with it (a chain's catch job).
//   - OutcomeCancelled: cancelled, its unique key freed; the cancel of a
//     running job by its own handler.
//   - OutcomeSnoozed: released until At with its attempt given back
//     (Attempts goes down by one); Counted adds one to its Snoozes.
//
// The outcome and its pushes are stored together or not at all; a pushed
// job whose ID or unique key an active job holds is skipped, not an
// error. A non-empty Batch (the job's MetaBatch) also records a done,
// failed or cancelled outcome in that batch, in the same transaction as
// the job's change, as Batcher.FinishMember does; a batch the store does
// not know is ignored.
type Completion struct {
	Lease   Lease
	Outcome Outcome
	At      time.Time
	Reason  string
	Counted bool
	Push    []Job
	Batch   string
}

// The optional abilities below are detected by type assertion, as
// database/sql/driver does. A driver that lacks one is still a complete
// Queue; the Worker and the typed helpers fall back to the core methods.

// BatchPusher is a Queue that stores many jobs in few round trips.
// DispatchMany uses it when present.
type BatchPusher interface {
	// PushMany stores jobs with Push's rules, one decision per job: stored[i]
	// reports whether jobs[i] was stored (false: a duplicate, skipped). An
	// error means nothing is known to be stored; callers may retry, and the
	// unique keys and IDs keep a retry from storing a job twice. Every job
	// must have an ID. A batch with a job beyond a limit of Validate stores
	// nothing and returns a *ValidationError whose Index names the job.
	PushMany(ctx context.Context, jobs []Job) (stored []bool, err error)
}

// BatchAcker is a Queue that acknowledges many jobs in one round trip. The
// Worker collects acks and flushes them through it when present.
type BatchAcker interface {
	// AckMany acks every lease it can. lost lists the leases that were no
	// longer current (each would have returned ErrLeaseLost from Ack). A
	// non-nil err means the batch as a whole failed and nothing is known to
	// be acked: the caller may retry while the leases hold.
	AckMany(ctx context.Context, leases []Lease) (lost []Lease, err error)
}

// BatchExtender is a Queue that extends many leases in one round trip. The
// Worker extends the leases it holds through it when present, so keeping a
// large prefetch alive costs one call per extension round, not one per job.
type BatchExtender interface {
	// ExtendMany sets the expiry of every lease it can to now plus d, as
	// Extend does, and returns the leases that were no longer current
	// (each would have returned ErrLeaseLost from Extend). A non-nil err
	// means the batch as a whole failed and no lease is known to be
	// extended: the caller may retry while the leases hold.
	ExtendMany(ctx context.Context, leases []Lease, d time.Duration) (lost []Lease, err error)
}

// Starter is a Queue that can lease jobs without counting an attempt, and
// count the attempt when a handler is about to start. The Worker prefetches
// through it: a job that waited leased in a process that crashed before
// starting it comes back with its attempts as they were, so a crash loop
// (a handler that exits the process) uses up the attempts of the jobs that
// ran, not of those that waited beside them.
type Starter interface {
	// ReserveUnstarted is Reserve without counting the attempt: each
	// returned job's Attempts is as stored, and a lease that ends (expires
	// or is released) before Start leaves it so.
	ReserveUnstarted(ctx context.Context, queues []string, max int, lease time.Duration) ([]Job, error)
	// Start counts one attempt for the job under each lease that is
	// current, in one round trip, and returns the leases that were not
	// (nothing counted for those). A non-nil err means no attempt is known
	// to be counted.
	Start(ctx context.Context, leases []Lease) (lost []Lease, err error)
}

// StartAcker is a Starter that writes start marks and acks in one
// transaction. The Worker then writes the start marks of prefetched jobs in
// its ack flushes, so a mark costs no commit of its own: one flush counts
// the attempts of the jobs about to start and acks the jobs that finished.
type StartAcker interface {
	Starter
	// StartAck counts one attempt for the job under each lease of starts
	// that is current, as Start does, and acks the job under each lease of
	// acks that is current, as BatchAcker.AckMany does, in one
	// transaction. lostStarts and lostAcks list the leases that were not
	// current (nothing done for those). A non-nil err means the call as a
	// whole failed and nothing is known to be counted or acked: the caller
	// may retry the acks while their leases hold. No lease may be in both
	// lists.
	StartAck(ctx context.Context, starts, acks []Lease) (lostStarts, lostAcks []Lease, err error)
}

// Waiter is a Queue that can block until a job may be ready, so the Worker
// does not poll. memqueue wakes waiters on Push; the PostgreSQL extras wake
// them with LISTEN/NOTIFY.
type Waiter interface {
	// Wait returns nil when a job may have become ready on one of queues or
	// when max has elapsed, whichever comes first, and ctx's error when ctx
	// is done. A spurious wake-up is allowed; a missed one is not, within
	// max.
	Wait(ctx context.Context, queues []string, max time.Duration) error
}

// RunObserver is a Queue that records per-run metrics (for the dashboard's
// charts) when the Worker reports them. Drivers that store metrics persist
// them with their next ack batch; the call itself must not block on I/O.
type RunObserver interface {
	ObserveRun(r RunRecord)
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
