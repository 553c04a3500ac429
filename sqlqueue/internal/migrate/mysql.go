package migrate

import "strings"

// MySQL (and MariaDB) commits DDL statement by statement, so files run
// outside a transaction under a named session lock (names are at most 64
// characters and server-wide, hence the database name in front). The
// lock waits at most ten minutes.
var MySQL = &Dialect{
	Dir:           "mysql",
	SessionLock:   "SELECT GET_LOCK(LEFT(CONCAT(DATABASE(), '/', ?), 64), 600)",
	SessionUnlock: "DO RELEASE_LOCK(LEFT(CONCAT(DATABASE(), '/', ?), 64))",
	TableExists:   "SELECT count(*) FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name = ?",
	// 1060: duplicate column name; 1061: duplicate key name (an index a
	// run cut short already added); 1091: can't drop, check that it
	// exists.
	Redundant: func(err error) bool {
		msg := err.Error()
		return strings.Contains(msg, "Error 1060 ") || strings.Contains(msg, "Error 1061 ") || strings.Contains(msg, "Error 1091 ")
	},
}
