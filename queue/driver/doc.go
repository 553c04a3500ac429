// Package driver is the contract between Meridian's Worker and the stores
// that keep jobs: the interfaces a store implements, the types both sides
// exchange (Job, Lease, JobInfo, ...), the sentinel errors a store returns,
// and the helpers only stores use. Applications use package queue; they
// meet this package only when they read the store directly (the dashboard's
// data, batches, counts).
//
// # The contract
//
// Every store implements Queue: push (one job or many), reserve under a
// lease (counting the attempt, or not until it starts), one batched
// Complete for every outcome of a handler (done, retried, failed,
// cancelled, snoozed, with a chain's next job and a batch member's batch),
// ExtendMany, and the dead letters. The optional abilities are seven
// interfaces (Inspector, Controller, Workflows, Scheduler, Reporter,
// Waiter, Fleet); CapabilitiesOf answers which of them a store has, so the
// Worker, the dashboard, the CLI and the conformance suite in contracttest
// degrade visibly instead of failing.
//
// A new store implements Queue, runs contracttest.Run from one test, and
// adds abilities one at a time: each is checked by the suite once the
// store has it.
//
// # Helpers for stores
//
// Validate and ValidateBatch hold every store to the same job limits;
// CheckBulk, BatchDue, MemberTransition and BatchLimit hold them to the same
// rules of bulk actions and batches; NewID, NewToken and WorkerOf give
// them IDs, lease tokens and the reserving worker's ID; FenceFrom the
// fence a write carries; PerMinute the rate QueueStats reports.
package driver
