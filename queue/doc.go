// Package queue is Meridian's portable layer: typed jobs, the contract every
// driver implements, and the Worker that runs handlers.
//
// # Jobs
//
// A job is any value that encodes as JSON. Dispatch encodes it and pushes it
// under a routing key, its Go type name (or the name its JobName method
// gives); Handle binds a typed handler for the same type:
//
//	type SendWelcomeEmail struct{ UserID uint64 }
//
//	w := queue.NewWorker(q)
//	queue.Handle[SendWelcomeEmail](w, func(ctx context.Context, j SendWelcomeEmail) error {
//		return mailer.Send(ctx, j.UserID)
//	})
//	go w.Run(ctx)
//	err := queue.Dispatch(ctx, q, SendWelcomeEmail{UserID: 42})
//
// Options set the queue, a delay or run-at time, priority, a unique key,
// max attempts, a timeout, tags and metadata. Dispatch treats a unique-key
// duplicate as success; Enqueue reports it and returns the job's ID.
//
// A handler may return data with SetResult (JSON, at most
// driver.MaxResultBytes): it is stored with the job's ack and kept for
// the Worker's ResultRetention; the dispatcher and later jobs read it with
// ResultOf, waiting for it if they like.
//
// Jobs dispatched with Group(key) wait in their group until it is due
// under the GroupRule of their type's HandleGroup (a grace after the
// newest member, a max delay after the oldest, a max size), and then reach
// that handler together as one typed slice: one set, leased, retried and
// dead-lettered as one job (asynq's group aggregation).
//
// # Drivers
//
// A driver implements the contract of package queue/driver: the core Queue
// (push, batch reserve under a lease, one batched Complete for every
// outcome, ExtendMany, dead letters, Len and Purge) and as many of the
// optional abilities (Inspector, Controller, Workflows, Scheduler,
// Reporter, Waiter, Fleet) as it can; driver.CapabilitiesOf tells the Worker and
// the helpers which it has, and what goes without the others. memqueue keeps jobs in
// memory; sqlqueue keeps them in SQLite, PostgreSQL or MySQL/MariaDB. The
// conformance suite in contracttest holds every driver to the same rules.
//
// Drivers register a URL scheme so a program can choose its driver from
// configuration with Open (memory://, sqlite://file.db, postgres://...,
// mysql://...).
//
// # Delivery and leases
//
// Delivery is at least once. A reserved job is leased to one worker; the
// worker extends the lease while the handler runs and acks, nacks or fails
// the job under it. If the worker dies, the lease expires and the job is
// delivered again; an attempt counts once its handler started (the jobs a
// worker holds in its prefetch buffer are counted only as they start), so a crash uses up an attempt of the jobs that were
// running, not of those waiting beside them. A job whose attempts were all
// used up by crashes is dead-lettered with ErrAttemptsExhausted when next
// reserved. A call made under a lease that was lost returns ErrLeaseLost and
// changes nothing. Handlers must be idempotent.
//
// # Retries and dead letters
//
// The worker, not the driver, retries. A handler error nacks the job for
// another attempt after the backoff (Backoff, BackoffPolicy with Fixed,
// Exponential or Delays) until MaxAttempts total attempts (or the job's own
// MaxAttempts) are used; then the job becomes a dead letter and OnFailed is
// called. Errors wrapped with Permanent, payloads that do not decode
// (ErrDecode) and names with no handler (ErrUnknownJob) are dead-lettered
// at once; the worker keeps running. A panic is a failed attempt whose
// error (ErrPanic) carries the stack.
//
// # Concurrency and throughput
//
// A Worker runs Concurrency handlers at once and reserves jobs in batches:
// for its idle handlers, plus a short buffer when jobs finish quickly (about
// 50ms of work at the measured rate, capped by Prefetch), so fast jobs cost
// one round trip per batch while slow jobs are never hoarded by one process.
// The buffered jobs are reserved without counting an attempt,
// and the attempts of the jobs that start while one such write is in flight
// are counted together in the next, just before their handlers run, as
// are those of the jobs reserved for idle handlers, so the buffer costs no
// write more and is kept whether or not the handlers are busy. Those
// counts ride in the flushes of outcomes: every outcome (done, retried,
// failed, cancelled, snoozed) is collected and flushed together through the
// driver's Complete (a batch of acks alone waits up to 5ms for more, so
// that at low load acks share commits; the handler never waits for its
// ack); a failed flush is retried while the leases hold, and leases are
// extended until their outcomes are flushed, every due lease in one
// ExtendMany call.
//
// # Shutdown
//
// Handler contexts do not derive from the context given to Run. When that
// context is cancelled or Stop is called, the worker stops reserving, lets
// running jobs finish within ShutdownTimeout, then cancels their contexts,
// flushes pending acks under a context of its own and returns. A job cut off
// this way is released for another attempt.
package queue
