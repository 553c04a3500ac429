// Command peers measures a Go job system and Meridian side by side on the
// store that system runs on, with the same mode code (internal/bench's
// Engine and Measure), in interleaved rounds, and prints a table of every
// round's figures with the median ratio of Meridian to the peer. --peer
// picks the system:
//
//   - gue (github.com/vgarvardt/gue/v5 v5.8.0) on PostgreSQL;
//   - neoq (github.com/acaloiaro/neoq v0.72.2), its PostgreSQL backend;
//   - goqite (maragu.dev/goqite v0.4.0) on SQLite.
//
// River has a command of its own, internal/bench/river. This one is a
// module of its own too, so that none of the peers enters the library's
// go.mod. Run it from the repository's root:
//
//	go run -C internal/bench/peers . --peer gue --rounds 3 --jobs 200000
//
// # What each side runs
//
// Each mode of each round runs on fresh storage, dropped afterwards:
// Meridian on new tables (as `meridian bench` makes them), gue in a new
// PostgreSQL schema (through search_path: it names its table itself),
// neoq in a new database (its migrations name the public schema), goqite and Meridian's SQLite queue each on a file of its
// own in a temporary directory. The jobs, the producers, the figures and
// the handler (decode the JSON payload, count, return) are the same code
// for every system. Each peer runs at its library's defaults, with the
// settings its documentation gives for production; the header the command
// prints names them:
//
//   - gue: a WorkerPool of --concurrency workers polling every 5 s
//     (PriorityPollStrategy), over adapter/pgxv5 and a pgxpool of --pool
//     connections. Each worker holds a connection while it polls and works
//     a job, so workers beyond --pool, and the producers' inserts, wait for
//     one: at the default --concurrency of 1,000 that wait dominates; set
//     --peer-concurrency to the pool's size to see gue without it (Meridian
//     keeps --concurrency). It queues
//     with EnqueueBatch and deletes finished jobs; its workers stop with
//     gue's graceful shutdown, so a running job's deletion commits. Its
//     default poll strategy orders a queue's due jobs by priority, which
//     its index (queue, run_at, priority) cannot serve: every job's poll
//     sorts the whole backlog, about 46 jobs/s from a 50,000-job backlog
//     here; --gue-strategy runat takes RunAtPollStrategy, which the index
//     serves.
//   - neoq: a handler of Concurrency --concurrency; it announces every job
//     by NOTIFY and looks for jobs no notification announced every
//     PendingJobCheckInterval (60 s), so a burn-down's backlog, queued
//     before its workers start, waits for that check. It queues one job
//     per Enqueue (it has no batch), and keeps processed jobs. neoq
//     refuses a job whose payload matches one not yet processed, so each
//     bench job carries a fingerprint of its own. Its Shutdown does not
//     wait for running jobs, so the last few completions of a mode may be
//     cut off rather than stored.
//   - goqite: a jobs.Runner with Limit --concurrency, polling every
//     100 ms, on a database/sql pool of one connection with WAL, a busy
//     timeout and foreign keys (its README's settings). It queues a
//     DispatchMany in one transaction and deletes finished jobs.
//
// The --gue-poll, --neoq-pending-check and --goqite-poll flags change
// those intervals; the header shows the values used.
//
// # Equal work
//
// Meridian deletes acked jobs by default; --keep-done makes it keep them
// (sqlqueue.WithRetention), the work neoq does. gue and goqite always
// delete.
//
// # Rounds
//
// Round r runs every mode for both systems, the peer first in odd rounds
// and Meridian first in even ones, so neither always meets the machine
// warmer or the server's caches fuller.
package main
