package migrate

import "strings"

// Postgres runs each file in a transaction that first takes a transaction
// advisory lock named after the tables, and the whole run under the same
// lock held by the session: a second runner waits for the first to finish
// all its files, then finds nothing to do, instead of taking turns with
// it file by file. (A session holding an advisory lock is granted it again
// at once; a runner of an earlier release, which takes only the
// transaction lock, still excludes and is excluded by this one.)
// A file the server rolled back to break a deadlock (SQLSTATE 40P01: its
// DDL waiting on a running worker's transaction that waits on the file's
// locks) runs again.
var Postgres = &Dialect{
	Dir:           "postgres",
	Begin:         "BEGIN",
	TxLock:        "SELECT 1 FROM (SELECT pg_advisory_xact_lock(hashtext($1))) AS l",
	SessionLock:   "SELECT 1 FROM (SELECT pg_advisory_lock(hashtext($1))) AS l",
	SessionUnlock: "SELECT pg_advisory_unlock(hashtext($1))",
	TableExists:   "SELECT count(*) FROM pg_catalog.pg_tables WHERE tablename = $1 AND schemaname = ANY(current_schemas(false))",
	Conflict: func(err error) bool {
		msg := err.Error()
		return strings.Contains(msg, "40P01") || strings.Contains(msg, "deadlock detected")
	},
}
