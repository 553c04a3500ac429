package sqlqueue

import (
	"errors"
	"reflect"
	"strings"

	"github.com/meridianjobs/meridian/sqlqueue/internal/migrate"
)

// mysqlDialect is MySQL 8.0.1+ and MariaDB 10.6+. Neither has partial
// indexes, and MySQL has no UPDATE ... RETURNING, so: active-job uniqueness
// is a UNIQUE index over a stored generated column that holds the unique key
// only while the job is pending (NULLs never collide); Reserve is a short
// READ COMMITTED transaction that selects with FOR UPDATE SKIP LOCKED and
// then updates by primary key; a batch ack is one DELETE (or UPDATE) by
// primary key whose affected-row count tells whether every lease held, and
// only when one did not is it rolled back and redone locking the rows by
// primary key first, to learn which. IDs, queue names and unique keys are
// VARBINARY (migration 0002) so they compare byte for byte, trailing spaces
// included, as on the other dialects.
var mysqlDialect = &dialect{
	name:              MySQL,
	quote:             func(s string) string { return "`" + s + "`" },
	maxParams:         65535,
	migrations:        migrate.MySQL,
	isUniqueViolation: mysqlUniqueViolation,
	skipLocked:        " FOR UPDATE SKIP LOCKED",
	readCommitted:     true,
	insertIgnore:      " ON DUPLICATE KEY UPDATE seq = seq",
	leaseToken:        func(seq string) string { return "CONCAT(?, '-', " + seq + ")" },
	greatest:          "GREATEST",
	stepLooseScan:     true,
	contains: func(col string, _ bool) string {
		return "LOCATE(?, " + col + ") > 0"
	},
	insertOrIgnore: func(table, cols, values string) string {
		return "INSERT IGNORE INTO " + table + " (" + cols + ") VALUES (" + values + ")"
	},
	upsertMetrics: func(table string) string {
		return "INSERT INTO " + table + ` (queue, minute_at, processed, failed, runtime_total_us, runtime_max_us, wait_total_us)
VALUES (?, ?, ?, ?, ?, ?, ?)
ON DUPLICATE KEY UPDATE
  processed = processed + VALUES(processed),
  failed = failed + VALUES(failed),
  runtime_total_us = runtime_total_us + VALUES(runtime_total_us),
  runtime_max_us = GREATEST(runtime_max_us, VALUES(runtime_max_us)),
  wait_total_us = wait_total_us + VALUES(wait_total_us)`
	},
	upsertWorker: func(table string) string {
		return "INSERT INTO " + table + ` (id, host, pid, queues, concurrency, started_at, last_seen)
VALUES (?, ?, ?, ?, ?, ?, ?)
ON DUPLICATE KEY UPDATE host = VALUES(host), pid = VALUES(pid), queues = VALUES(queues),
  concurrency = VALUES(concurrency), last_seen = VALUES(last_seen)`
	},
}

// mysqlUniqueViolation matches error 1062 (ER_DUP_ENTRY) from
// go-sql-driver/mysql without importing it: its *MySQLError has a Number
// field.
func mysqlUniqueViolation(err error) bool {
	for e := err; e != nil; e = errors.Unwrap(e) {
		v := reflect.ValueOf(e)
		for v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface {
			if v.IsNil() {
				break
			}
			v = v.Elem()
		}
		if v.Kind() == reflect.Struct {
			if f := v.FieldByName("Number"); f.IsValid() && f.CanUint() && f.Uint() == 1062 {
				return true
			}
		}
	}
	return err != nil && strings.Contains(err.Error(), "Error 1062")
}
