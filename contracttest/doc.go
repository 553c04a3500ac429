// Package contracttest is the conformance suite of Meridian's queue
// contract: the rules of queue.Queue and its optional interfaces, written
// once and run against every driver.
//
// # Use
//
// A driver's package calls Run from one test, with a Harness that makes a
// new, isolated queue per check:
//
//	func TestContract(t *testing.T) {
//		contracttest.Run(t, contracttest.Harness{
//			New: func(t *testing.T) queue.Queue { return memqueue.New() },
//		})
//	}
//
// A SQL driver's New creates a fresh table (or database file) and drops it
// in t.Cleanup; it also sets Harness.Tx, to check transactional enqueue,
// and Harness.Peer, to check two handles on one store as two processes
// would use it.
//
// # What it checks
//
// Core contract (every driver):
//   - Push: every Job field round-trips (times within Caps.TimePrecision),
//     empty IDs and CreatedAt are filled in, an empty queue means
//     queue.DefaultQueue, and payloads are bytes (invalid JSON, empty, NUL
//     bytes, invalid UTF-8, 256 KiB) stored intact.
//   - Order: priority (higher first), then AvailableAt, then insertion,
//     whatever the batch size and merged across the named queues; a job is
//     not delivered before its AvailableAt, including AvailableAt past 2038
//     and past 2262, and one available since 1900 is ready; after claims
//     that took all they asked for, a job ready before them all is taken
//     first by the next Reserve with room for it.
//   - Unique keys: held while ready, scheduled, running and after a Nack;
//     free again after Ack, dead-lettering and Purge; per queue. A push of
//     an active job's ID is a duplicate; a finished job's ID is free.
//   - Bytes: IDs, queue names and unique keys compare byte for byte, so
//     values that differ only in trailing spaces are different values.
//   - Reserve: max respected (a max of 0 or -1 reserves nothing), only the
//     named queues, a new token and
//     Attempts incremented per delivery; Len and Purge by state and queue.
//   - Leases: an expired lease makes the job reservable again with the
//     attempt counted; outcomes and extensions under a stale, wrong or
//     finished lease report queue.ErrLeaseLost and change nothing; a retry
//     respects its time and records LastError; an extension keeps a job
//     from re-delivery past its first lease (and sets now plus d);
//     Attempts and MaxAttempts are kept for the worker's decision; eight
//     concurrent reservers never hold one job at once and every job is
//     delivered exactly once.
//   - Dead letters: a failed outcome lists a job with its reason, most recent first,
//     per queue and with a limit (a limit <= 0 is the largest page);
//     RetryDead resets attempts; ForgetDead and FlushDead delete;
//     ErrNotFound for jobs that are not dead letters;
//     pushing a dead letter's ID revives it with attempts reset.
//   - Context: every method given a cancelled context returns an error
//     matching context.Canceled and changes nothing.
//
// The core's batch calls: PushMany (per-job stored flags for duplicates
// within the batch and against stored jobs, 1,500 jobs in one call),
// Complete (every outcome, pushes, batch members, start marks, lost leases
// reported one by one), ExtendMany (lost leases reported; extended leases
// hold past the original expiry), ReserveUnstarted (no attempt counted
// until a start), ReserveStarting (a fresh job counted by its claim, one
// taken back from an expired lease only at its start), and the
// uniqueness modes of every Push (UniqueFor holds after finish, Replace of a
// waiting job).
//
// The abilities queue.CapabilitiesOf finds, each checked when the store has
// it and skipped, saying what it lacks, otherwise: queue.Waiter (a push
// wakes a waiting Wait, a ready job returns at once, max bounds it, ctx
// ends it), queue.Inspector (GetJob and ListJobs in every state, filters,
// keyset paging that covers every job exactly once and refuses a foreign
// cursor with ErrBadCursor, QueueStats counts, Counts, DeadSince,
// OldestReady, and with queue.Reporter the per-minute Metrics and the
// worker registry), queue.Controller (pause, cancel of waiting and running
// jobs with unique keys freed, bulk actions), queue.Scheduler (one holder,
// expiry, racing handles, epochs, a tick claimed once) and
// queue.Workflows (batches). Harness.Tx and Harness.Peer gate the
// transactional and cross-process checks.
//
// Cross-process (Harness.Peer), with real Workers over two handles: a
// periodic job registered by both is handled once per tick over ten
// consecutive one-second ticks; a Leader replaces a holder that died
// without releasing within TTL plus one renew; a cancel from the other
// handle reaches a running handler within a second.
//
// # What it does not check
//
// The worker's behaviour (retries, backoff, dead-lettering after the last
// attempt, timeouts, panics, shutdown) is the queue package's own test.
// The suite asserts on time only where a promise is a time bound (leader
// failover, cancel reaching a handler), with room for a loaded machine; it
// never asserts on speed: waits are bounded generously and
// leases are short (300ms) only where expiry is the point.
package contracttest
