package sqlqueue

import (
	"errors"
	"strconv"
	"strings"
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
	tableExists:         "SELECT count(*) FROM pg_catalog.pg_tables WHERE tablename = $1 AND schemaname = ANY(current_schemas(false))",
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
	ddl:       postgresDDL,
}

func postgresDDL(t tableNames) []string {
	return []string{
		`CREATE TABLE IF NOT EXISTS ` + t.jobs + ` (
  id TEXT PRIMARY KEY,
  seq BIGINT GENERATED ALWAYS AS IDENTITY,
  queue TEXT NOT NULL,
  name TEXT NOT NULL,
  payload BYTEA NOT NULL,
  priority INTEGER NOT NULL,
  attempts INTEGER NOT NULL,
  max_attempts INTEGER NOT NULL,
  timeout_us BIGINT NOT NULL,
  unique_key TEXT,
  tags TEXT NOT NULL,
  meta TEXT NOT NULL,
  available_at BIGINT NOT NULL,
  run_at BIGINT NOT NULL,
  created_at BIGINT NOT NULL,
  updated_at BIGINT NOT NULL,
  finished_at BIGINT NOT NULL,
  last_error TEXT NOT NULL,
  lease_token TEXT,
  state TEXT NOT NULL,
  lease_expires_at BIGINT NOT NULL DEFAULT 0
)`,
		// A queue table turns over its rows all the time: vacuum and
		// analyze it after a small fraction of changes, not autovacuum's
		// default 20%, and without throttling. Pages are filled to half,
		// so that each row's claim finds room on its own page for the new
		// row version: a claim changes only lease_expires_at, lease_token,
		// attempts and updated_at, none of them indexed, so with room it is
		// a HOT update and writes no index entry. ALTER so that tables set
		// up before these settings get them too.
		`ALTER TABLE ` + t.jobs + ` SET (fillfactor = 50, autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_threshold = 1000,
  autovacuum_vacuum_insert_scale_factor = 0.01, autovacuum_analyze_scale_factor = 0.02, autovacuum_vacuum_cost_delay = 0)`,
		`CREATE INDEX IF NOT EXISTS ` + t.claimIdx + ` ON ` + t.jobs + ` (queue, priority DESC, run_at, seq) WHERE state = 'pending'`,
		`CREATE UNIQUE INDEX IF NOT EXISTS ` + t.uniqueIdx + ` ON ` + t.jobs + ` (queue, unique_key) WHERE state = 'pending' AND unique_key IS NOT NULL`,
		`CREATE INDEX IF NOT EXISTS ` + t.stateIdx + ` ON ` + t.jobs + ` (state, queue, seq)`,
		`CREATE INDEX IF NOT EXISTS ` + t.finIdx + ` ON ` + t.jobs + ` (state, finished_at) WHERE state <> 'pending'`,
		`CREATE TABLE IF NOT EXISTS ` + t.pauses + ` (queue TEXT PRIMARY KEY, paused_at BIGINT NOT NULL)`,
		`CREATE TABLE IF NOT EXISTS ` + t.workers + ` (
  id TEXT PRIMARY KEY,
  host TEXT NOT NULL,
  pid INTEGER NOT NULL,
  queues TEXT NOT NULL,
  concurrency INTEGER NOT NULL,
  started_at BIGINT NOT NULL,
  last_seen BIGINT NOT NULL
)`,
		`CREATE TABLE IF NOT EXISTS ` + t.metrics + ` (
  queue TEXT NOT NULL,
  minute_at BIGINT NOT NULL,
  processed BIGINT NOT NULL,
  failed BIGINT NOT NULL,
  runtime_total_us BIGINT NOT NULL,
  runtime_max_us BIGINT NOT NULL,
  wait_total_us BIGINT NOT NULL,
  PRIMARY KEY (queue, minute_at)
)`,
		`CREATE TABLE IF NOT EXISTS ` + t.meta + ` (name TEXT PRIMARY KEY, value TEXT NOT NULL, expires_at BIGINT NOT NULL)`,
	}
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
