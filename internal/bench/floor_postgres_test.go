package bench

import (
	"context"
	"os"
	"testing"
	"time"
)

// BenchmarkPostgresFloor measures PostgreSQL's floor for issue 32's goals
// there: the server's CPU per job of the fewest statements the
// burn-down's work phase needs, in its batch sizes (claims and acks of
// 500), on one connection.
//
// A job is a row with its ID as primary key and, while it waits, an entry
// in a partial claim index (queue, priority, run_at, seq: the rows of
// state 'pending'), on a table with Meridian's fillfactor (36, so that a
// claim's update stays on its page: a HOT update, no index written).
// Working it takes a claim, one UPDATE ... WHERE id IN (SELECT ... FOR
// UPDATE SKIP LOCKED) RETURNING that leases the job and counts its
// attempt, and an ack, in a transaction of its own, that deletes it and
// keeps a count per queue; the table is vacuumed every 10,000 acks, as
// Meridian's maintenance does on a server without autovacuum. What the
// floor leaves out is what Meridian's schema and promises add: the count
// triggers, the unique-key and list indexes (partial here, so a job that
// only waits and is acked writes neither), the lease tokens checked on
// every ack, the payload, history and timing columns, and the
// notifications.
//
// It reports what BenchmarkMariaDBFloor does; run it likewise, with
// MERIDIAN_POSTGRES_DSN set:
//
//	go test -run '^$' -bench PostgresFloor -benchtime 200000x ./internal/bench
//
// and compare srv-us/job with the PostgreSQL burn-down's server CPU per
// 1,000 jobs (docs/benchmarks.md, "The MariaDB and PostgreSQL floors").
func BenchmarkPostgresFloor(b *testing.B) {
	dsn := os.Getenv("MERIDIAN_POSTGRES_DSN")
	if dsn == "" {
		b.Skip("MERIDIAN_POSTGRES_DSN is not set")
	}
	const batch, vacuumEvery = 500, 10000
	ctx := context.Background()
	target := Postgres(dsn)
	db, err := target.open(ctx, 1)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	table := uniqueTable() + "_floor"
	for _, s := range []string{
		`CREATE TABLE ` + table + ` (id TEXT PRIMARY KEY, seq BIGSERIAL NOT NULL, queue TEXT NOT NULL, priority INT NOT NULL,
  run_at BIGINT NOT NULL, state TEXT NOT NULL, attempts INT NOT NULL, lease_token TEXT, lease_expires_at BIGINT NOT NULL,
  payload BYTEA NOT NULL) WITH (fillfactor = 36)`,
		`CREATE INDEX ` + table + `_claim ON ` + table + ` (queue, priority DESC, run_at, seq) WHERE state = 'pending'`,
		`CREATE TABLE ` + table + `_counts (queue TEXT PRIMARY KEY, n BIGINT NOT NULL)`,
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
	if _, err := db.ExecContext(ctx, "INSERT INTO "+table+" (id, queue, priority, run_at, state, attempts, lease_expires_at, payload)"+
		" SELECT lpad(to_hex(i), 32, '0'), 'default', 0, $1, 'pending', 0, 0, '{\"T\":0}' FROM generate_series(1, $2) i", now, b.N); err != nil {
		b.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "UPDATE "+table+"_counts SET n = $1", b.N); err != nil {
		b.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "VACUUM ANALYZE "+table); err != nil {
		b.Fatal(err)
	}
	claim := "UPDATE " + table + " SET attempts = attempts + 1, lease_token = $1 || seq, lease_expires_at = $2 WHERE id IN (SELECT id FROM " + table +
		" WHERE state = 'pending' AND queue = 'default' AND priority = 0 AND run_at <= $3 AND lease_expires_at <= $3 ORDER BY run_at, seq LIMIT $4 FOR UPDATE SKIP LOCKED)" +
		" RETURNING id, payload, attempts"

	meter := startFloorMeter(target)
	b.ResetTimer()
	for worked, sinceVacuum := 0, 0; worked < b.N; {
		at := time.Now().UnixMicro()
		rows, err := db.QueryContext(ctx, claim, "t-", at+time.Minute.Microseconds(), at, batch)
		if err != nil {
			b.Fatal(err)
		}
		var ids []string
		for rows.Next() {
			var id string
			var payload []byte
			var attempts int
			if err := rows.Scan(&id, &payload, &attempts); err != nil {
				b.Fatal(err)
			}
			ids = append(ids, id)
		}
		if err := rows.Err(); err != nil {
			b.Fatal(err)
		}
		if len(ids) == 0 {
			b.Fatalf("the claim found nothing after %d of %d jobs", worked, b.N)
		}
		t, err := db.BeginTx(ctx, nil)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := t.ExecContext(ctx, "DELETE FROM "+table+" WHERE id = ANY($1)", ids); err != nil {
			b.Fatal(err)
		}
		if _, err := t.ExecContext(ctx, "UPDATE "+table+"_counts SET n = n - $1 WHERE queue = 'default'", len(ids)); err != nil {
			b.Fatal(err)
		}
		if err := t.Commit(); err != nil {
			b.Fatal(err)
		}
		worked += len(ids)
		if sinceVacuum += len(ids); sinceVacuum >= vacuumEvery {
			if _, err := db.ExecContext(ctx, "VACUUM "+table); err != nil {
				b.Fatal(err)
			}
			sinceVacuum = 0
		}
	}
	b.StopTimer()
	meter.report(b)
	floorEmptied(b, db, table)
}
