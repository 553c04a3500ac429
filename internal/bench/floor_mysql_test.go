package bench

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// BenchmarkMariaDBFloor measures the MariaDB floor issue 32 allows for its
// goal of 40 us of server CPU per job: the server's CPU per job of the
// fewest statements and B-tree writes the burn-down's work phase needs,
// in the burn-down's batch sizes (claims and acks of 500, as `meridian
// bench --calls` shows the Worker's, 522 a call at 1,000 handlers).
//
// A job is a row clustered on its ID, with its AUTO_INCREMENT sequence (the
// FIFO order) in a unique index and an entry in a claim index (queue,
// state, priority, run_at, seq). Working it takes a claim in one READ
// COMMITTED transaction, a locking read (FOR UPDATE SKIP LOCKED) and an
// update by primary key that leases the job and counts its attempt (the
// row changed in place, no index entry), and an ack, in a transaction of
// its own, that deletes the row (its three index entries) and keeps a
// count per queue. These are Meridian's own claim and ack; what the floor
// leaves out is what Meridian's schema and promises add: the unique-key
// index (queue, active_key), the list index behind the dashboard's pages
// (state, queue, finished_at, seq), the count triggers, the lease tokens
// checked on every ack, and the payload, history and timing columns.
//
// Sub-benchmarks:
//   - "fewest writes": the floor.
//   - "with Meridian's indexes": the same statements on a table with
//     Meridian's two further indexes, which every push and ack writes: the
//     price of unique keys and of listing finished jobs without a sort.
//
// It reports the server's CPU per job (srv-us/job, from /proc when the DSN
// names this machine) and the client's (cpu-us/job). Run, against a quiet
// server, with MERIDIAN_MYSQL_DSN set:
//
//	go test -run '^$' -bench MariaDBFloor -benchtime 200000x ./internal/bench
//
// and compare srv-us/job with the MariaDB burn-down's server CPU per 1,000
// jobs (docs/benchmarks.md, "The MariaDB and PostgreSQL floors").
func BenchmarkMariaDBFloor(b *testing.B) {
	dsn := os.Getenv("MERIDIAN_MYSQL_DSN")
	if dsn == "" {
		b.Skip("MERIDIAN_MYSQL_DSN is not set")
	}
	b.Run("fewest writes", func(b *testing.B) { mariaDBFloor(b, dsn, false) })
	b.Run("with Meridian's indexes", func(b *testing.B) { mariaDBFloor(b, dsn, true) })
}

func mariaDBFloor(b *testing.B, dsn string, meridianIndexes bool) {
	const batch = 500
	ctx := context.Background()
	// Statements are sent with their arguments in their text, as
	// sqlqueue/mysql.Open's connections send them (interpolateParams),
	// rather than prepared and closed per call.
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	target := MySQL(dsn + sep + "interpolateParams=true")
	db, err := target.open(ctx, 2)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	table := uniqueTable() + "_floor"
	extra := ""
	if meridianIndexes {
		extra = `, active_key VARBINARY(1020) GENERATED ALWAYS AS (CASE WHEN state = 0 THEN unique_key END) STORED,
  finished_at BIGINT NOT NULL DEFAULT 0,
  UNIQUE KEY uq (queue, active_key), KEY list (state, queue, finished_at, seq)`
	}
	for _, s := range []string{
		`CREATE TABLE ` + table + ` (id VARBINARY(1020) NOT NULL PRIMARY KEY, seq BIGINT NOT NULL AUTO_INCREMENT,
  queue VARBINARY(1020) NOT NULL, priority INT NOT NULL, run_at BIGINT NOT NULL, state INT NOT NULL, attempts INT NOT NULL,
  lease_token VARCHAR(64) NULL, lease_expires_at BIGINT NOT NULL, unique_key VARBINARY(1020) NULL, payload LONGBLOB NOT NULL,
  UNIQUE KEY seq (seq), KEY claim (queue, state, priority DESC, run_at, seq)` + extra + `) ENGINE=InnoDB`,
		`CREATE TABLE ` + table + `_counts (queue VARBINARY(1020) NOT NULL PRIMARY KEY, n BIGINT NOT NULL) ENGINE=InnoDB`,
		`INSERT INTO ` + table + `_counts VALUES ('default', 0)`,
	} {
		if _, err := db.ExecContext(ctx, s); err != nil {
			b.Fatalf("%s: %v", s, err)
		}
	}
	defer func() {
		if _, err := db.ExecContext(ctx, "DROP TABLE IF EXISTS "+table+", "+table+"_counts"); err != nil {
			b.Error(err)
		}
	}()

	// The fill (the burn-down's queueing phase) is not measured.
	now := time.Now().UnixMicro()
	for done := 0; done < b.N; {
		n := min(1000, b.N-done)
		args := make([]any, 0, 2*n)
		for i := range n {
			args = append(args, fmt.Sprintf("%032x", done+i), now)
		}
		if _, err := db.ExecContext(ctx, "INSERT INTO "+table+" (id, queue, priority, run_at, state, attempts, lease_expires_at, payload) VALUES "+
			list("(?, 'default', 0, ?, 0, 0, 0, '{\"T\":0}')", n), args...); err != nil {
			b.Fatal(err)
		}
		done += n
	}
	if _, err := db.ExecContext(ctx, "UPDATE "+table+"_counts SET n = ?", b.N); err != nil {
		b.Fatal(err)
	}
	tx := func(fn func(*sql.Tx) error) {
		t, err := db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
		if err != nil {
			b.Fatal(err)
		}
		if err := fn(t); err != nil {
			_ = t.Rollback()
			b.Fatal(err)
		}
		if err := t.Commit(); err != nil {
			b.Fatal(err)
		}
	}
	claim := "SELECT id, seq, payload, attempts FROM " + table +
		" WHERE queue = 'default' AND state = 0 AND priority = 0 AND run_at <= ? AND lease_expires_at <= ? ORDER BY run_at, seq LIMIT ? FOR UPDATE SKIP LOCKED"

	meter := startFloorMeter(target)
	b.ResetTimer()
	for worked := 0; worked < b.N; {
		var ids []any
		tx(func(t *sql.Tx) error {
			at := time.Now().UnixMicro()
			rows, err := t.QueryContext(ctx, claim, at, at, batch)
			if err != nil {
				return err
			}
			defer rows.Close()
			for rows.Next() {
				var id string
				var seq int64
				var payload []byte
				var attempts int
				if err := rows.Scan(&id, &seq, &payload, &attempts); err != nil {
					return err
				}
				ids = append(ids, id)
			}
			if err := rows.Err(); err != nil {
				return err
			}
			if len(ids) == 0 {
				return fmt.Errorf("the claim found nothing after %d of %d jobs", worked, b.N)
			}
			args := append([]any{"t", at + time.Minute.Microseconds()}, ids...)
			_, err = t.ExecContext(ctx, "UPDATE "+table+" SET attempts = attempts + 1, lease_token = CONCAT(?, '-', seq), lease_expires_at = ? WHERE id IN ("+list("?", len(ids))+")", args...)
			return err
		})
		tx(func(t *sql.Tx) error {
			if _, err := t.ExecContext(ctx, "DELETE FROM "+table+" WHERE id IN ("+list("?", len(ids))+")", ids...); err != nil {
				return err
			}
			_, err := t.ExecContext(ctx, "UPDATE "+table+"_counts SET n = n - ? WHERE queue = 'default'", len(ids))
			return err
		})
		worked += len(ids)
	}
	b.StopTimer()
	meter.report(b)
	floorEmptied(b, db, table)
}

// floorMeter measures a floor benchmark's CPU per job: this process's
// (the client's) and, when the DSN names this machine, the database
// server's.
type floorMeter struct {
	target       *SQL
	cpu0, srv0   time.Duration
	cpuOK, srvOK bool
}

func startFloorMeter(target *SQL) floorMeter {
	m := floorMeter{target: target}
	m.srv0, m.srvOK = target.ServerCPU()
	m.cpu0, m.cpuOK = ProcessCPU()
	return m
}

// report adds cpu-us/job and srv-us/job to b's results.
func (m floorMeter) report(b *testing.B) {
	if cpu1, ok := ProcessCPU(); m.cpuOK && ok {
		b.ReportMetric(float64(cpu1-m.cpu0)/float64(time.Microsecond)/float64(b.N), "cpu-us/job")
	}
	if srv1, ok := m.target.ServerCPU(); m.srvOK && ok {
		b.ReportMetric(float64(srv1-m.srv0)/float64(time.Microsecond)/float64(b.N), "srv-us/job")
	}
}

// floorEmptied fails b unless the floor's jobs table is empty: every job
// was worked.
func floorEmptied(b *testing.B, db *sql.DB, table string) {
	var left int
	if err := db.QueryRowContext(context.Background(), "SELECT count(*) FROM "+table).Scan(&left); err != nil || left != 0 {
		b.Fatalf("%d jobs left, %v; want none", left, err)
	}
}

// list returns n copies of item, comma-separated.
func list(item string, n int) string {
	return strings.TrimSuffix(strings.Repeat(item+",", n), ",")
}
