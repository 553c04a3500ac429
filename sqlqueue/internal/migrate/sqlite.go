package migrate

import "strings"

// SQLite runs all the files of a run in one BEGIN IMMEDIATE transaction
// (its DDL is transactional), which takes the database's write lock up
// front: that is the migration lock, held for the whole run, so a second
// runner finds nothing to do once it has the lock. The busy timeout makes
// it wait for the lock instead of failing.
var SQLite = &Dialect{
	Dir:         "sqlite",
	Prepare:     []string{"PRAGMA busy_timeout=30000"},
	Begin:       "BEGIN IMMEDIATE",
	WholeRun:    true,
	TableExists: "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?",
	Redundant: func(err error) bool {
		msg := err.Error()
		return strings.Contains(msg, "duplicate column name") || strings.Contains(msg, "no such column")
	},
}
