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
// lease, ack, nack, fail and extend, and the dead letters. The optional
// abilities are a few coherent interfaces; Capabilities answers which of
// them a store has, so the Worker, the dashboard and the conformance suite
// in contracttest degrade visibly instead of failing.
//
// # Helpers for stores
//
// Validate and ValidateBatch hold every store to the same job limits;
// CheckBulk, BatchDue, MemberTransition and BatchLimit hold them to the same
// rules of bulk actions and batches; NewID, NewToken and WorkerOf give
// them IDs, lease tokens and the reserving worker's ID.
package driver
