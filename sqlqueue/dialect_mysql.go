package sqlqueue

import (
	"errors"
	"reflect"
	"strings"
)

// mysqlDialect is MySQL 8.0.1+ and MariaDB 10.6+. Neither has partial
// indexes, and MySQL has no UPDATE ... RETURNING, so: active-job uniqueness
// is a UNIQUE index over a stored generated column that holds the unique key
// only while the job is pending (NULLs never collide); Reserve is a short
// READ COMMITTED transaction that selects with FOR UPDATE SKIP LOCKED and
// then updates by primary key; a batch ack is one DELETE (or UPDATE) by
// primary key whose affected-row count tells whether every lease held, and
// only when one did not is it rolled back and redone locking the rows by
// primary key first, to learn which. Text columns use utf8mb4_bin so IDs, queue names and
// keys compare byte for byte, as on the other dialects.
var mysqlDialect = &dialect{
	name:              MySQL,
	quote:             func(s string) string { return "`" + s + "`" },
	maxParams:         65535,
	tableExists:       "SELECT count(*) FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name = ?",
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
	ddl: mysqlDDL,
}

func mysqlDDL(t tableNames) []string {
	const opts = ` ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`
	return []string{
		`CREATE TABLE IF NOT EXISTS ` + t.jobs + ` (
  id VARCHAR(255) NOT NULL,
  seq BIGINT NOT NULL AUTO_INCREMENT,
  queue VARCHAR(255) NOT NULL,
  name VARCHAR(255) NOT NULL,
  payload LONGBLOB NOT NULL,
  priority INT NOT NULL,
  attempts INT NOT NULL,
  max_attempts INT NOT NULL,
  timeout_us BIGINT NOT NULL,
  unique_key VARCHAR(255) NULL,
  tags TEXT NOT NULL,
  meta TEXT NOT NULL,
  available_at BIGINT NOT NULL,
  run_at BIGINT NOT NULL,
  created_at BIGINT NOT NULL,
  updated_at BIGINT NOT NULL,
  finished_at BIGINT NOT NULL,
  last_error TEXT NOT NULL,
  lease_token VARCHAR(64) NULL,
  state VARCHAR(8) NOT NULL,
  active_key VARCHAR(255) GENERATED ALWAYS AS (CASE WHEN state = 'pending' THEN unique_key END) STORED,
  PRIMARY KEY (id),
  UNIQUE KEY ` + t.seqIdx + ` (seq),
  KEY ` + t.claimIdx + ` (queue, state, priority DESC, run_at, seq),
  UNIQUE KEY ` + t.uniqueIdx + ` (queue, active_key),
  KEY ` + t.stateIdx + ` (state, queue, seq),
  KEY ` + t.finIdx + ` (state, finished_at)
)` + opts,
		`CREATE TABLE IF NOT EXISTS ` + t.pauses + ` (queue VARCHAR(255) NOT NULL PRIMARY KEY, paused_at BIGINT NOT NULL)` + opts,
		`CREATE TABLE IF NOT EXISTS ` + t.workers + ` (
  id VARCHAR(255) NOT NULL PRIMARY KEY,
  host VARCHAR(255) NOT NULL,
  pid INT NOT NULL,
  queues TEXT NOT NULL,
  concurrency INT NOT NULL,
  started_at BIGINT NOT NULL,
  last_seen BIGINT NOT NULL
)` + opts,
		`CREATE TABLE IF NOT EXISTS ` + t.metrics + ` (
  queue VARCHAR(255) NOT NULL,
  minute_at BIGINT NOT NULL,
  processed BIGINT NOT NULL,
  failed BIGINT NOT NULL,
  runtime_total_us BIGINT NOT NULL,
  runtime_max_us BIGINT NOT NULL,
  wait_total_us BIGINT NOT NULL,
  PRIMARY KEY (queue, minute_at)
)` + opts,
		`CREATE TABLE IF NOT EXISTS ` + t.meta + ` (name VARCHAR(64) NOT NULL PRIMARY KEY, value VARCHAR(255) NOT NULL, expires_at BIGINT NOT NULL)` + opts,
	}
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
