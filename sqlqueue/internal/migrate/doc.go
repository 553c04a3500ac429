// Package migrate holds the SQL of the queue's tables as numbered,
// embedded migrations per dialect, and the runner that applies them.
//
// # Files
//
// sql/<dialect>/NNNN_name.up.sql moves the schema from version NNNN-1 to
// NNNN; NNNN_name.down.sql moves it back. Numbers start at 0001 and have
// no gaps in each dialect; a dialect whose schema does not change in a
// release gets no file (the numbering is per dialect). Names in braces,
// such as {jobs} or {claim_idx}, are replaced by the quoted names of one
// queue's tables and indexes (see Vars); any other brace is an error.
//
// Statements are separated by a semicolon at the end of a line. Each up
// file ends by recording its version in the {meta} table's
// 'schema_version' row, each down file by recording the previous one (the
// down file of 0001 drops the tables, the row with them). The runner
// checks that the file did so.
//
// # Running
//
// Up and Down apply files one at a time under a lock that serialises
// concurrent runners on the same tables and is held for the whole run: a
// second runner waits for the first to finish, then reads the version it
// left and finds nothing to do, so only one of them reports migrating.
// Where DDL is transactional (PostgreSQL, SQLite) each file runs in a
// transaction that also reads the version, so a file is applied wholly or
// not at all: on PostgreSQL one per file, each taking the advisory lock
// the session already holds; on SQLite one for the whole run, whose write
// lock is the migration lock. MySQL and MariaDB commit each DDL statement
// on its own: there the lock is a named session lock (GET_LOCK) and every
// statement of a file is written to be idempotent, so a run cut short is
// completed by running the file again (its version is recorded only after
// its last statement).
package migrate
