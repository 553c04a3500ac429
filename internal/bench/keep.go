package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/meridianjobs/meridian/queue"
)

// keepChunk is how many kept rows one statement writes: each is one
// server-side INSERT ... SELECT over a generated series, so that a
// million rows take seconds, not a million dispatches.
const keepChunk = 100_000

// Keep writes n rows of finished work on queue name into the jobs table
// of q (Options.Kept): of every 20 rows, 17 done, 2 pending and scheduled
// one to ten hours ahead, 1 dead. The done and dead rows finished in the
// two hours before now, one every few microseconds, as a busy queue's
// retention window holds them. The statements are the store's own bulk
// form: generate_series on PostgreSQL, the sequence engine on MariaDB, a
// recursive CTE on SQLite; the store's count triggers count them.
//
// Then the store is brought to where a table that kept these rows over
// hours would be, so that the mode measures the rows and not the write
// that just made them: PostgreSQL vacuums the table (sqlqueue's vacuum by
// ack count would have, as the rows were acked: the visibility map set,
// hint bits written) and checkpoints (a gigabyte of fresh WAL otherwise
// makes the mode pay for the checkpoint it triggers and a full-page image
// at each page's first change after it); SQLite checkpoints its WAL into
// the database file. MariaDB has neither step: InnoDB's purge and
// flushing run in the background.
func (s *SQL) Keep(ctx context.Context, q queue.Queue, name string, n int) error {
	table, db, err := s.onTable(ctx, q)
	if err != nil {
		return err
	}
	defer db.Close()
	now := time.Now().UnixMicro()
	for lo := 1; lo <= n; lo += keepChunk {
		hi := min(lo+keepChunk-1, n)
		if _, err := db.ExecContext(ctx, s.keepStmt(table, now, n, lo, hi), name); err != nil {
			return fmt.Errorf("inserting kept rows %d to %d: %w", lo, hi, err)
		}
	}
	var settle []string
	switch s.name {
	case "postgres":
		settle = []string{"VACUUM " + s.quote(table), "CHECKPOINT"}
	case "sqlite":
		settle = []string{"PRAGMA wal_checkpoint(TRUNCATE)"}
	}
	for _, stmt := range settle {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("%s after the kept rows: %w", stmt, err)
		}
	}
	return nil
}

// keepStmt is the statement that writes kept rows lo to hi of n into
// table, as of now (Unix microseconds); its one parameter is the queue.
func (s *SQL) keepStmt(table string, now int64, n, lo, hi int) string {
	param, id, series, payload := "$1", "'kept-' || i", fmt.Sprintf("generate_series(%d::bigint, %d) AS g(i)", lo, hi), "'\\x7b7d'::bytea"
	switch s.name {
	case "mysql":
		param, id, series, payload = "?", "CONCAT('kept-', i)", fmt.Sprintf("(SELECT seq AS i FROM seq_%d_to_%d) AS g", lo, hi), "X'7b7d'"
	case "sqlite":
		param, payload = "?", "X'7b7d'"
		series = fmt.Sprintf("(WITH RECURSIVE r(i) AS (SELECT %d UNION ALL SELECT i + 1 FROM r WHERE i < %d) SELECT i FROM r) AS g", lo, hi)
	}
	// finished: when a done or dead row finished, spread over the two
	// hours before now; ahead: a scheduled row's run_at.
	finished := fmt.Sprintf("(%d - (%d - i) * %d)", now, n, max(int64(2*time.Hour/time.Microsecond)/int64(n), 1))
	ahead := fmt.Sprintf("(%d + (1 + i %% 10) * %d)", now, int64(time.Hour/time.Microsecond))
	state := "CASE WHEN i % 20 < 17 THEN 'done' WHEN i % 20 < 19 THEN 'pending' ELSE 'dead' END"
	pick := func(done, sched, dead string) string {
		return fmt.Sprintf("CASE WHEN i %% 20 < 17 THEN %s WHEN i %% 20 < 19 THEN %s ELSE %s END", done, sched, dead)
	}
	runAt := pick(finished+" - 1000", ahead, finished+" - 1000")
	return "INSERT INTO " + s.quote(table) + " (id, queue, name, payload, priority, attempts, max_attempts, timeout_us, tags, meta, " +
		"available_at, run_at, created_at, updated_at, finished_at, last_error, state, started_at) SELECT " +
		id + ", " + param + ", 'meridian_bench', " + payload + ", 0, " + pick("1", "0", "25") + ", 25, 0, '', '', " +
		runAt + ", " + runAt + ", " + pick(finished+" - 2000", fmt.Sprint(now), finished+" - 2000") + ", " +
		pick(finished, fmt.Sprint(now), finished) + ", " + pick(finished, "0", finished) + ", " +
		pick("''", "''", "'bench: a kept dead job'") + ", " + state + ", " + pick(finished+" - 500", "0", finished+" - 500") +
		" FROM " + series
}
