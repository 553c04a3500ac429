// Command river measures River (github.com/riverqueue/river v0.51.2) and
// Meridian side by side, with the same mode code (internal/bench's Engine
// and Measure), in interleaved rounds, and prints a table of every round's
// figures with the median ratio of Meridian to River. --store picks the
// store both run on: PostgreSQL (River over riverpgxv5) or SQLite (River
// over riversqlite).
//
// It is a module of its own so that River never enters the library's
// go.mod. Run it from the repository's root:
//
//	go run -C internal/bench/river . --rounds 3 --jobs 200000
//	go run -C internal/bench/river . --store sqlite --rounds 3 --jobs 50000
//
// # What each side runs
//
// Each mode of each round runs on fresh storage. On PostgreSQL, Meridian
// runs on new tables (as `meridian bench` makes them, through
// sqlqueue/postgres.Open), River on a new schema migrated with
// rivermigrate; both are dropped afterwards. On SQLite each runs on a
// file of its own in a temporary directory: Meridian through
// sqlqueue/sqlite.Open (one connection, WAL, synchronous=NORMAL), River
// through riversqlite on a database/sql pool of one connection (the
// advice of riversqlite's package documentation) with the same WAL and
// synchronous settings. The jobs, the producers, the handler (decode the
// JSON payload, count, return) and the figures are the same code for
// both. River's client uses its own bench's settings (FetchCooldown 2 ms,
// FetchPollInterval 20 ms) and MaxWorkers equal to --concurrency; on
// PostgreSQL both systems get a pgxpool of --pool connections, the size
// sqlqueue/postgres opens. River queues with InsertManyFast (COPY on
// PostgreSQL, one row at a time on SQLite).
//
// # Equal work
//
// River keeps completed jobs (its default retention) where Meridian
// deletes acked ones (its default). --keep-done makes Meridian keep them
// too (sqlqueue.WithRetention), so a run at the defaults and one with
// --keep-done compare both systems' defaults and the same work.
//
// # Rounds
//
// Round r runs every mode for both systems, River first in odd rounds and
// Meridian first in even ones, so neither always meets the machine warmer
// or the server's caches fuller.
package main
