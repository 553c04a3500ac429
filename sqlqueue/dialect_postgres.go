package sqlqueue

import (
	"errors"
	"strconv"
	"strings"

	"github.com/meridianjobs/meridian/sqlqueue/internal/migrate"
)

// vacuumDeadRows is the number of dead rows in the jobs table from which
// Maintain vacuums it on PostgreSQL.
const vacuumDeadRows = 10000

// postgresDialect is PostgreSQL 12+: one-statement claims with FOR UPDATE
// SKIP LOCKED, partial indexes, RETURNING everywhere, pg_notify on push.
var postgresDialect = &dialect{
	name:                Postgres,
	quote:               quoteDouble,
	dollar:              true,
	maxParams:           65535,
	migrations:          migrate.Postgres,
	isUniqueViolation:   pgUniqueViolation,
	returning:           true,
	oneStatementReserve: true,
	leaseCol:            "lease_expires_at",
	insertIgnore:        " ON CONFLICT DO NOTHING RETURNING id",
	reviveGuard:         true,
	leaseToken:          func(seq string) string { return "CAST(? AS TEXT) || '-' || " + seq },
	reviveSeq:           "DEFAULT",
	greatest:            "GREATEST",
	contains: func(col string, blob bool) string {
		if blob {
			return "position(CAST(? AS BYTEA) in " + col + ") > 0"
		}
		return "strpos(" + col + ", CAST(? AS TEXT)) > 0"
	},
	insertOrIgnore: func(table, cols, values string) string {
		return "INSERT INTO " + table + " (" + cols + ") VALUES (" + values + ") ON CONFLICT DO NOTHING"
	},
	upsertMetrics: func(table string) string {
		return "INSERT INTO " + table + ` AS m (queue, minute_at, processed, failed, runtime_total_us, runtime_max_us, wait_total_us)
VALUES (?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (queue, minute_at) DO UPDATE SET
  processed = m.processed + EXCLUDED.processed,
  failed = m.failed + EXCLUDED.failed,
  runtime_total_us = m.runtime_total_us + EXCLUDED.runtime_total_us,
  runtime_max_us = GREATEST(m.runtime_max_us, EXCLUDED.runtime_max_us),
  wait_total_us = m.wait_total_us + EXCLUDED.wait_total_us`
	},
	upsertWorker: func(table string) string {
		return "INSERT INTO " + table + ` (id, host, pid, queues, concurrency, started_at, last_seen)
VALUES (?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (id) DO UPDATE SET host = EXCLUDED.host, pid = EXCLUDED.pid, queues = EXCLUDED.queues,
  concurrency = EXCLUDED.concurrency, last_seen = EXCLUDED.last_seen`
	},
	// The lease terms are wrapped in IS TRUE so that the primary key is the
	// only index the planner can use: bare, "run_at > $n" matches the
	// claim index and an unanalyzed table is read through all of it
	// (1,000 acks over 1,000,000 queued jobs: 140-160 ms, against 9-12 ms
	// by primary key). unnest keeps the nested loop over the primary key
	// under a generic plan too (it assumes 10 elements), where a VALUES
	// list of an analyzed table becomes a hash join over a sequential scan.
	ackMany: func(table string, _ int, set string) string {
		using := " unnest(CAST(? AS TEXT[]), CAST(? AS TEXT[])) AS v(id, tok)"
		head := "DELETE FROM " + table + " t USING" + using
		if set != "" {
			head = "UPDATE " + table + " t SET " + set + " FROM" + using
		}
		return head + " WHERE t.id = v.id AND (t.lease_token = v.tok AND t.state = 'pending' AND t.lease_expires_at > ?) IS TRUE RETURNING t.id, t.lease_token"
	},
	ackArrays: true,
	notify:    "SELECT pg_notify(?, ?)",
	// Claims are HOT updates (no indexed column changes), but acks delete
	// rows whose index entries stay at the head of the claim index: later
	// claims walk past them until a vacuum removes them.
	vacuumDue: "SELECT COALESCE((SELECT n_dead_tup >= " + strconv.Itoa(vacuumDeadRows) + " FROM pg_stat_user_tables WHERE relid = to_regclass(?)), false)",
	vacuum:    "VACUUM (ANALYZE) {jobs}",
}

// pgUniqueViolation matches SQLSTATE 23505 from pgx (and any driver whose
// errors report SQLState()), or lib/pq's message.
func pgUniqueViolation(err error) bool {
	var s interface{ SQLState() string }
	if errors.As(err, &s) {
		return s.SQLState() == "23505"
	}
	return err != nil && strings.Contains(err.Error(), "23505")
}
