// Command river measures River (github.com/riverqueue/river, over
// riverpgxv5) and Meridian side by side on one PostgreSQL database, with
// the same mode code (internal/bench's Engine and Measure), in interleaved
// rounds, and prints a table of every round's figures with the median
// ratio of Meridian to River.
//
// It is a module of its own so that River never enters the library's
// go.mod. Run it from the repository's root:
//
//	go run -C internal/bench/river . --rounds 3 --jobs 200000
//
// # What each side runs
//
// Each mode of each round runs on fresh storage: Meridian on new tables
// (as `meridian bench` makes them, through sqlqueue/postgres.Open), River
// on a new schema migrated with rivermigrate; both are dropped afterwards.
// The jobs, the producers, the handler (decode the JSON payload, count,
// return) and the figures are the same code for both. River's client uses
// its own bench's settings (FetchCooldown 2 ms, FetchPollInterval 20 ms),
// MaxWorkers equal to --concurrency, and a pgxpool of --pool connections,
// the size sqlqueue/postgres opens; it queues with InsertManyFast (COPY), as
// Meridian's DispatchMany does on PostgreSQL. River keeps completed jobs
// (its default retention) where Meridian deletes acked ones (its default).
//
// # Rounds
//
// Round r runs every mode for both systems, River first in odd rounds and
// Meridian first in even ones, so neither always meets the machine warmer
// or the server's caches fuller.
package main
