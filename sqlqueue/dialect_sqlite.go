package sqlqueue

import (
	"errors"
	"strconv"
	"strings"

	"github.com/meridianjobs/meridian/sqlqueue/internal/migrate"
)

// sqliteDialect is SQLite 3.35+ (RETURNING, partial indexes). SQLite has
// one writer: New limits the pool to one connection, writes that span
// statements run in BEGIN IMMEDIATE transactions, the file is switched to
// WAL and a busy timeout makes other processes wait for the lock instead of
// failing.
var sqliteDialect = &dialect{
	name:              SQLite,
	quote:             quoteDouble,
	maxParams:         32766,
	migrations:        migrate.SQLite,
	isUniqueViolation: sqliteUniqueViolation,
	returning:         true,
	immediate:         true,
	insertIgnore:      " ON CONFLICT DO NOTHING RETURNING id",
	reviveGuard:       true,
	leaseToken:        func(seq string) string { return "? || '-' || " + seq },
	reviveSeq:         "(SELECT MAX(seq) + 1 FROM {jobs})",
	greatest:          "MAX",
	contains: func(col string, _ bool) string {
		return "instr(" + col + ", ?) > 0"
	},
	insertOrIgnore: func(table, cols, values string) string {
		return "INSERT OR IGNORE INTO " + table + " (" + cols + ") VALUES (" + values + ")"
	},
	upsertMetrics: func(table string) string {
		return "INSERT INTO " + table + ` (queue, minute_at, processed, failed, runtime_total_us, runtime_max_us, wait_total_us)
VALUES (?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (queue, minute_at) DO UPDATE SET
  processed = processed + excluded.processed,
  failed = failed + excluded.failed,
  runtime_total_us = runtime_total_us + excluded.runtime_total_us,
  runtime_max_us = MAX(runtime_max_us, excluded.runtime_max_us),
  wait_total_us = wait_total_us + excluded.wait_total_us`
	},
	upsertWorker: func(table string) string {
		return "INSERT INTO " + table + ` (id, host, pid, queues, concurrency, started_at, last_seen)
VALUES (?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (id) DO UPDATE SET host = excluded.host, pid = excluded.pid, queues = excluded.queues,
  concurrency = excluded.concurrency, last_seen = excluded.last_seen`
	},
	ackMany:   sqliteAckMany,
	ackArrays: true,
}

// sqliteUniqueViolation matches SQLITE_CONSTRAINT_UNIQUE (2067) and
// SQLITE_CONSTRAINT_PRIMARYKEY (1555) from drivers whose errors report
// Code() (modernc.org/sqlite), or the message otherwise.
func sqliteUniqueViolation(err error) bool {
	var c interface{ Code() int }
	if errors.As(err, &c) {
		return c.Code() == 2067 || c.Code() == 1555
	}
	return err != nil && strings.Contains(err.Error(), "UNIQUE constraint failed")
}

// sqliteAckMany finishes the leases given as two text-array literals (IDs,
// tokens; see pgArray), turned into JSON arrays. Each token ends in its
// row's seq (leaseToken), so every lease is one rowid lookup.
func sqliteAckMany(table string, _ int, set string) string {
	// Parameters: set's (numbered here), then ids, tokens, now.
	var b strings.Builder
	n := 0
	for _, c := range set {
		if c == '?' {
			n++
			b.WriteString("?" + strconv.Itoa(n))
			continue
		}
		b.WriteRune(c)
	}
	set = b.String()
	ids, toks, now := "?"+strconv.Itoa(n+1), "?"+strconv.Itoa(n+2), "?"+strconv.Itoa(n+3)
	js := func(p string) string { return "'[' || substr(" + p + ", 2, length(" + p + ") - 2) || ']'" }
	head := "DELETE FROM " + table
	if set != "" {
		head = "UPDATE " + table + " SET " + set
	}
	return "WITH a(k, id) AS MATERIALIZED (SELECT key, value FROM json_each(" + js(ids) + ")) " +
		head + " WHERE seq IN (SELECT CAST(substr(value, instr(value, '-') + 1) AS INTEGER) FROM json_each(" + js(toks) + "))" +
		" AND (id, lease_token) IN (SELECT a.id, b.value FROM json_each(" + js(toks) + ") b JOIN a ON a.k = b.key)" +
		" AND +state = 'pending' AND +run_at > " + now + " RETURNING id, lease_token"
}
