package bench

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// BenchmarkSQLiteFloor measures the SQLite floor issue 32 names: the CPU
// per job of the fewest B-tree writes the burn-down's work phase needs on
// one connection, in the burn-down's batch sizes. A job is a row (a rowid
// table) with its ID in a unique index and, while it waits, an entry in a
// partial claim index; working it takes a claim that leases it and counts
// its attempt (the row rewritten, its claim entry deleted: 2 writes), and
// an ack that deletes it (the row and its ID entry: 2 writes), each in
// batches (claims of 1,000, acks of 250, as `meridian bench --calls`
// shows the Worker's), with a count per queue kept in the ack's
// transaction. No lease token is checked, no history, list index, or
// scheduled-job bookkeeping is kept: a bound from below on what any queue
// with Meridian's promises spends on SQLite.
//
// The floor of the burn-down's work phase is this figure plus the
// Worker's own CPU per job on the memory driver (`meridian bench --driver
// memory --modes burndown`: its client CPU per 1,000 jobs): run
//
//	go test -run '^$' -bench SQLiteFloor -benchtime 200000x ./internal/bench
//
// and compare the sum with the SQLite burn-down's client CPU per 1,000
// jobs (docs/benchmarks.md, "The SQLite floor").
//
// The sub-benchmark "with start marks" adds what the Worker's promise
// that an attempt counts only when its handler starts costs a job it
// holds ahead of its handlers: the claim leaves attempts alone, and a
// batched UPDATE per 250 jobs counts them before their acks.
func BenchmarkSQLiteFloor(b *testing.B) {
	b.Run("fewest writes", func(b *testing.B) { sqliteFloor(b, false) })
	b.Run("with start marks", func(b *testing.B) { sqliteFloor(b, true) })
}

func sqliteFloor(b *testing.B, marks bool) {
	const claimBatch, ackBatch = 1000, 250
	ctx := context.Background()
	db, err := sql.Open("sqlite", filepath.Join(b.TempDir(), "floor.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	for _, s := range []string{
		"PRAGMA journal_mode=WAL", "PRAGMA synchronous=NORMAL",
		`CREATE TABLE jobs (seq INTEGER PRIMARY KEY, id TEXT NOT NULL, queue TEXT NOT NULL, priority INTEGER NOT NULL,
  run_at INTEGER NOT NULL, state INTEGER NOT NULL, attempts INTEGER NOT NULL, lease TEXT, lease_expires_at INTEGER NOT NULL, payload BLOB NOT NULL)`,
		"CREATE UNIQUE INDEX jobs_id ON jobs (id)",
		"CREATE INDEX jobs_claim ON jobs (queue, priority, run_at, seq) WHERE state = 0",
		"CREATE TABLE counts (queue TEXT PRIMARY KEY, n INTEGER NOT NULL)",
		"INSERT INTO counts VALUES ('default', 0)",
	} {
		if _, err := db.ExecContext(ctx, s); err != nil {
			b.Fatalf("%s: %v", s, err)
		}
	}
	// The fill (the burn-down's queueing phase) is not measured.
	now := time.Now().UnixMicro()
	for done := 0; done < b.N; {
		n := min(claimBatch, b.N-done)
		var q strings.Builder
		q.WriteString("INSERT INTO jobs (id, queue, priority, run_at, state, attempts, lease_expires_at, payload) VALUES ")
		args := make([]any, 0, 2*n)
		for i := range n {
			if i > 0 {
				q.WriteString(",")
			}
			q.WriteString("(?, 'default', 0, ?, 0, 0, 0, '{\"T\":0}')")
			args = append(args, fmt.Sprintf("%032x", done+i), now)
		}
		if _, err := db.ExecContext(ctx, q.String(), args...); err != nil {
			b.Fatal(err)
		}
		done += n
	}
	if _, err := db.ExecContext(ctx, "UPDATE counts SET n = ?", b.N); err != nil {
		b.Fatal(err)
	}

	inc := 1
	if marks {
		inc = 0
	}
	claim := `UPDATE jobs SET state = 1, attempts = attempts + ` + strconv.Itoa(inc) + `, lease = ?1 || seq, lease_expires_at = ?2
WHERE seq IN (SELECT seq FROM jobs INDEXED BY jobs_claim WHERE queue = 'default' AND state = 0 AND priority = 0 AND run_at <= ?3
  ORDER BY run_at, seq LIMIT ?4)
RETURNING seq, id, payload, attempts`
	ack := "DELETE FROM jobs WHERE seq IN (SELECT value FROM json_each(?1)) AND +state = 1"
	start := "UPDATE jobs SET attempts = attempts + 1 WHERE seq IN (SELECT value FROM json_each(?1)) AND +state = 1"
	count := "UPDATE counts SET n = n - ?1 WHERE queue = 'default'"
	conn, err := db.Conn(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	exec := func(s string, args ...any) {
		if _, err := conn.ExecContext(ctx, s, args...); err != nil {
			b.Fatalf("%s: %v", s, err)
		}
	}

	cpu0, ok := ProcessCPU()
	b.ResetTimer()
	worked := 0
	for worked < b.N {
		exec("BEGIN IMMEDIATE")
		rows, err := conn.QueryContext(ctx, claim, "t-", time.Now().Add(time.Minute).UnixMicro(), time.Now().UnixMicro(), claimBatch)
		if err != nil {
			b.Fatal(err)
		}
		var seqs []int64
		for rows.Next() {
			var seq int64
			var id string
			var payload []byte
			var attempts int
			if err := rows.Scan(&seq, &id, &payload, &attempts); err != nil {
				b.Fatal(err)
			}
			seqs = append(seqs, seq)
		}
		if err := rows.Err(); err != nil {
			b.Fatal(err)
		}
		rows.Close()
		exec("COMMIT")
		if len(seqs) == 0 {
			b.Fatalf("the claim found nothing after %d of %d jobs", worked, b.N)
		}
		for i := 0; i < len(seqs); i += ackBatch {
			part := seqs[i:min(i+ackBatch, len(seqs))]
			var list strings.Builder
			list.WriteString("[")
			for k, s := range part {
				if k > 0 {
					list.WriteString(",")
				}
				list.WriteString(strconv.FormatInt(s, 10))
			}
			list.WriteString("]")
			if marks {
				// The marks of these jobs, in a flush of their own (the
				// Worker's ride with the acks of the jobs before them).
				exec("BEGIN IMMEDIATE")
				exec(start, list.String())
				exec("COMMIT")
			}
			exec("BEGIN IMMEDIATE")
			exec(ack, list.String())
			exec(count, len(part))
			exec("COMMIT")
		}
		worked += len(seqs)
	}
	b.StopTimer()
	if cpu1, ok1 := ProcessCPU(); ok && ok1 {
		b.ReportMetric(float64(cpu1-cpu0)/float64(time.Microsecond)/float64(b.N), "cpu-us/job")
	}
	var left int
	if err := conn.QueryRowContext(ctx, "SELECT count(*) FROM jobs").Scan(&left); err != nil || left != 0 {
		b.Fatalf("%d jobs left, %v; want none", left, err)
	}
}
