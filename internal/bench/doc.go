// Package bench is the benchmark harness behind `meridian bench` and the
// package's `go test -bench` benchmarks: it measures a queue driver end to
// end through the public API (Dispatch, DispatchMany, Worker) and sets the
// figures beside a baseline measured on the same database in the same run.
//
// # Modes
//
// Run measures, on a fresh and empty queue for each mode:
//
//   - burn-down: Options.Jobs jobs are queued first with DispatchMany, then
//     the workers handle them with a no-op handler; the figure is jobs/s
//     from the workers' start until the last ack is flushed.
//   - continuous: producers dispatch batches with DispatchMany while the
//     workers run, for Options.Duration; the figure is jobs handled per
//     second after a warm-up. Producers pause while the backlog exceeds
//     Options.MaxBacklog, so the figure is a sustainable rate, not the
//     speed of filling a table.
//   - dispatch: Dispatch of one job at a time from Options.Dispatchers
//     goroutines, and DispatchMany of Options.ChunkSize jobs from
//     Options.Producers goroutines, each for Options.Duration, no workers.
//   - latency: single Dispatches paced at Options.Rate jobs/s for
//     Options.LatencyDuration while the workers run; the figures are the
//     50th, 95th and 99th percentiles and the maximum of the time from the
//     job's tick to the handler's start (a tick waits for a free
//     dispatcher, and that wait counts: no coordinated omission).
//
// Each mode drives an Engine: Meridian over a queue.Queue (QueueEngine),
// or another job system measured by the same code through Measure (the
// River comparison, the nested module internal/bench/river).
//
// # CPU
//
// The burn-down also reports the CPU time per 1,000 jobs of each phase:
// the client's (this process, from getrusage: producers and workers) and,
// for a database server on this machine, the server's (its processes'
// times from /proc, other users of the server included). On a shared
// machine these move far less than throughput does.
//
// # Several queues, and a Redis Cluster
//
// Options.Queues spreads every mode's jobs over that many queues (each
// dispatch to the next in turn; worker i works them all in strict order
// from queue i). On a Redis Cluster a queue's keys share one hash slot, so
// one queue is served by one master, one script at a time, however many
// masters there are: only several queues can spread, and the Redis
// target names them so that their slots fall on different masters. It
// reads INFO from every master, and reports beside the server's CPU per
// 1,000 jobs (summed over the masters) the mean, busiest and least busy
// master's, and jobs per server core-second: the sizing model.
// internal/bench/redis-scale.sh measures one server against Clusters of
// 3 and 6 masters.
//
// # Baseline
//
// A Target backed by a database also measures the database's own pace:
// single-row INSERT transactions per second from Options.BaselineConns
// connections into a plain table of the harness's own, as
// `pgbench -c 8` with a one-INSERT script does. Every throughput figure is
// reported as a ratio to it, so results from different machines compare.
// The memory target has no baseline and reports absolute figures only.
//
// # Isolation
//
// Targets make every queue in tables with a unique name (prefix
// "meridian_bench_") and drop them afterwards, so a run never reads or
// writes a user's jobs. A run that is killed may leave such tables behind;
// they are safe to drop.
package bench
