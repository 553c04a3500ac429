// Package memqueue is the in-memory driver of Meridian: a queue.Queue for
// tests, local development and single-process programs.
//
// # Use
//
//	q := memqueue.New()
//	_ = queue.Dispatch(ctx, q, SendWelcomeEmail{UserID: 42})
//	w := queue.NewWorker(q)
//
// Importing the package also registers the memory:// scheme with
// queue.Open; every Open returns a new, empty queue.
//
// # Durability and scope
//
// Jobs live only in the process's memory: a restart loses every job,
// pending or dead. A Queue is shared by goroutines of one process, never by
// several processes. Use sqlqueue when jobs must survive a restart or be
// shared by several processes.
//
// # Semantics
//
// Queue implements the whole contract of queue.Queue, checked by the
// contracttest suite, and every optional ability of package queue/driver:
// Inspector, Controller, Workflows, Scheduler, Reporter, Waiter and Fleet.
// All methods are safe for concurrent use.
//
//   - Reserve takes ready jobs in order of priority (higher first), then
//     AvailableAt, then insertion, merged across the named queues.
//   - A lease is valid until it expires: an outcome (Complete) or an
//     extension (ExtendMany) after that reports it lost
//     (queue.ErrLeaseLost), even before the job is reserved again. An expired job goes back to ready, its attempt counted.
//   - Wait wakes at once when a job is pushed to, nacked on, retried on or
//     resumed on a queue it waits for; there is no poll delay.
//   - Push copies the payload, tags and meta it stores. Jobs returned by
//     Reserve, DeadLetters and inspection share them with the store and
//     must be treated as read-only.
//
// # Retention
//
// Acked jobs are kept in a bounded ring, the last DefaultRetention (1,000)
// by default (WithRetention to change it), so that inspection can list and
// get them in queue.StateDone; older ones are deleted. Dead letters are
// kept until retried, forgotten or flushed. Run metrics (ObserveRun) are
// kept per queue and job name, per minute for the last hour and per hour
// (HourlyMetrics) for driver.MetricsRetention (seven days), at most 1,000
// names per queue and minute or hour (more are counted as "(other)"),
// updated in place as each run is observed; worker registry
// entries are dropped a minute after their last heartbeat.
//
// # Speed
//
// One mutex guards the queue; no goroutine or timer runs per job. Each
// named queue keeps its ready jobs in FIFO lanes per priority, where a job
// pushed available now is appended and reserved in O(1), with a heap for
// jobs that arrive out of order (a delayed job coming due, an expired
// lease); scheduled jobs wait in a heap promoted on access, and leases in
// an expiry heap whose expired entries are promoted on access. Push,
// Reserve and an ack each cost a few allocations per job; see the benchmarks
// in bench_test.go (BenchmarkBurnDown, BenchmarkBatch,
// BenchmarkPushReserveAck).
package memqueue
