package migrate

import "strings"

// SQLite runs each file in a BEGIN IMMEDIATE transaction, which takes the
// database's write lock up front: that is the migration lock. The busy
// timeout makes a second runner wait for it instead of failing.
var SQLite = &Dialect{
	Dir:         "sqlite",
	Prepare:     []string{"PRAGMA busy_timeout=30000"},
	Begin:       "BEGIN IMMEDIATE",
	TableExists: "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?",
	Redundant: func(err error) bool {
		msg := err.Error()
		return strings.Contains(msg, "duplicate column name") || strings.Contains(msg, "no such column")
	},
}
