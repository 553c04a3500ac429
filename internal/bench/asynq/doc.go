// Command asynq measures asynq (github.com/hibiken/asynq) and Meridian's
// Redis driver (redisqueue) side by side on one Redis server, with the same
// mode code (internal/bench's Engine and Measure), in interleaved rounds,
// and prints a table of every round's figures with the median ratio of
// Meridian to asynq.
//
// It is a module of its own so that asynq never enters the library's
// go.mod. Run it from the repository's root:
//
//	go run -C internal/bench/asynq . --rounds 3 --jobs 200000
//
// # What each side runs
//
// Each mode of each round runs on fresh storage. Meridian's queues use
// keys under a new prefix of their own, deleted afterwards, in database
// --redis-db; asynq has no key prefix, so the same database is emptied
// (FLUSHDB) before and after each of its measurements: give the harness a
// database nothing else uses (default 15). The jobs, the producers, the
// handler (decode the JSON payload, count, return) and the figures are
// the same code for both.
//
// asynq runs at its defaults (one "default" queue, TaskCheckInterval
// 1 s, completed tasks deleted as Meridian deletes acked jobs) with
// Concurrency equal to --concurrency. Its processor sleeps
// TaskCheckInterval whenever it finds no task, which sets its latency at a
// steady rate; --asynq-task-check-interval shows it tuned. It has no batch enqueue, so its
// DispatchMany enqueues its tasks one by one from --asynq-fanout
// goroutines; Meridian's DispatchMany is one call (a pipelined script per
// chunk).
//
// Server CPU per job is read from INFO cpu, and the burn-down reports the
// server's memory per queued job (INFO memory's used_memory before and
// after the fill), so the Redis server should serve nothing else meanwhile.
//
// # Memory by key kind
//
// Before the rounds (--memory-jobs N, default 100,000; 0 skips it, and
// --rounds 0 runs only it) each system queues N jobs three ways (ready as
// in the burn-down, scheduled an hour ahead, ready and unique by payload:
// asynq.Unique, queue.UniqueByPayload) and works none. The harness SCANs
// the system's keys, groups them by kind (the key with Meridian's prefix
// written "p" and every part of 20 characters or more, an ID or a digest,
// written <id>), reads MEMORY USAGE (SAMPLES 0) of up to 200 keys of each
// kind, and prints each kind's bytes per key and per queued job, their sum
// and the growth of used_memory per job.
//
// # Rounds
//
// Round r runs every mode for both systems, asynq first in odd rounds and
// Meridian first in even ones.
package main
