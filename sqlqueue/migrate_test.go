package sqlqueue_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meridianjobs/meridian/internal/testutil"
	queue "github.com/meridianjobs/meridian/queue/driver"
	"github.com/meridianjobs/meridian/sqlqueue"
)

// v1Table is the table name in testdata/schema_v1, the DDL that
// sqlqueue.Schema printed before migrations existed (schema version 1),
// recorded with `meridian schema --dialect D --table meridian_v1`.
const v1Table = "meridian_v1"

// createV1 creates s's tables as the release before migrations did.
func createV1(t *testing.T, db *sql.DB, s store) {
	t.Helper()
	ddl, err := os.ReadFile("testdata/schema_v1/" + string(s.b.dialect) + ".sql")
	if err != nil {
		t.Fatal(err)
	}
	for _, stmt := range strings.Split(strings.ReplaceAll(string(ddl), v1Table, s.table), ";\n\n") {
		if stmt = strings.TrimSuffix(strings.TrimSpace(stmt), ";"); stmt == "" {
			continue
		}
		if _, err := db.ExecContext(t.Context(), stmt); err != nil {
			t.Fatalf("creating the v1 tables: %v\n%s", err, stmt)
		}
	}
	if s.b.dialect != sqlqueue.SQLite {
		t.Cleanup(func() { dropTables(db, s.table) })
	}
}

func dropTables(db *sql.DB, table string) {
	for _, suffix := range tableSuffixes {
		_, _ = db.ExecContext(context.Background(), "DROP TABLE IF EXISTS "+table+suffix)
	}
}

// insertV1Jobs writes jobs in every state as the v1 code stored them.
func insertV1Jobs(t *testing.T, db *sql.DB, s store) {
	t.Helper()
	now := time.Now().UnixMicro()
	past, future := now-int64(time.Second/time.Microsecond), now+int64(time.Hour/time.Microsecond)
	row := func(id, state, uniqueKey, tags, meta, lastErr string, runAt, finishedAt int64) string {
		uk := "NULL"
		if uniqueKey != "" {
			uk = "'" + uniqueKey + "'"
		}
		return fmt.Sprintf("INSERT INTO %s (id, queue, name, payload, priority, attempts, max_attempts, timeout_us, unique_key, tags, meta, available_at, run_at, created_at, updated_at, finished_at, last_error, lease_token, state) "+
			"VALUES ('%s', 'mail', 'Send', '{}', 0, 0, 3, 0, %s, '%s', '%s', %d, %d, %d, %d, %d, '%s', NULL, '%s')",
			s.table, id, uk, tags, meta, runAt, runAt, past, past, finishedAt, lastErr, state)
	}
	stmts := []string{
		row("v1-ready", "pending", "welcome:42", `["a"]`, `{"k":"v"}`, "", past, 0),
		row("v1-later", "pending", "", "", "", "", future, 0),
		row("v1-running", "pending", "", "", "", "", past, 0),
		row("v1-dead", "dead", "", "", "", "boom", past, now),
		row("v1-done", "done", "", "", "", "", past, now),
	}
	// A running job holds a lease: its token ends in the row's seq, and
	// its expiry is in lease_expires_at (PostgreSQL) or, before their
	// migrations 0003 (SQLite) and 0004 (MySQL), in run_at.
	expiry := "run_at"
	if s.b.dialect == sqlqueue.Postgres {
		expiry = "lease_expires_at"
	}
	stmts = append(stmts, fmt.Sprintf("UPDATE %s SET attempts = 1, %s = %d, lease_token = CONCAT('tok-', seq) WHERE id = 'v1-running'", s.table, expiry, future))
	if s.b.dialect == sqlqueue.SQLite {
		stmts[len(stmts)-1] = strings.Replace(stmts[len(stmts)-1], "CONCAT('tok-', seq)", "'tok-' || seq", 1)
	}
	for _, stmt := range stmts {
		if _, err := db.ExecContext(t.Context(), stmt); err != nil {
			t.Fatalf("%v\n%s", err, stmt)
		}
	}
}

// TestUpgradeFromV1 upgrades tables created and filled by the release
// before migrations (schema version 1) with Setup, checks the jobs are
// intact and workable, and migrates back down to 1 and to 0.
func TestUpgradeFromV1(t *testing.T) {
	eachDialect(t, func(t *testing.T, b backend) {
		ctx := t.Context()
		s := newStore(t, b)
		db := b.open(t, s.path)
		createV1(t, db, s)
		insertV1Jobs(t, db, s)

		q, err := sqlqueue.New(db, sqlqueue.WithTable(s.table))
		if err != nil {
			t.Fatal(err)
		}
		latest, err := sqlqueue.LatestSchemaVersion(b.dialect)
		if err != nil {
			t.Fatal(err)
		}
		if got, _, err := q.SchemaVersions(ctx); err != nil || got != 1 {
			t.Fatalf("v1 tables record version %d, %v; want 1", got, err)
		}
		if err := q.Setup(ctx); err != nil {
			t.Fatalf("Setup over v1 tables: %v", err)
		}
		if got, _, err := q.SchemaVersions(ctx); err != nil || got != latest {
			t.Fatalf("after Setup the tables record version %d, %v; want %d", got, err, latest)
		}

		wantStates := map[string]queue.JobState{
			"v1-ready": queue.StateReady, "v1-later": queue.StateScheduled, "v1-running": queue.StateRunning,
			"v1-dead": queue.StateDead, "v1-done": queue.StateDone,
		}
		for id, want := range wantStates {
			info, err := q.GetJob(ctx, id)
			if err != nil || info.State != want || info.Queue != "mail" || string(info.Payload) != "{}" {
				t.Errorf("GetJob(%s) = %+v, %v; want state %s in queue mail with payload {}", id, info, err, want)
			}
		}
		// The running job's lease expiry moved out of run_at (SQLite 0003,
		// MySQL 0004): it keeps its available-at and its lease.
		running, err := q.GetJob(ctx, "v1-running")
		if err != nil || running.LeaseExpiresAt.Before(time.Now().Add(30*time.Minute)) || running.AvailableAt.After(time.Now()) {
			t.Errorf("GetJob(v1-running) after the upgrade = lease until %v, available at %v, %v; want a lease an hour ahead and a past available-at",
				running.LeaseExpiresAt, running.AvailableAt, err)
		}
		jobs, err := q.Reserve(ctx, []string{"mail"}, 10, time.Minute)
		if err != nil || len(jobs) != 1 || jobs[0].ID != "v1-ready" {
			t.Fatalf("Reserve after the upgrade = %v, %v; want v1-ready alone", jobs, err)
		}
		j := jobs[0]
		if j.UniqueKey != "welcome:42" || !slices.Equal(j.Tags, []string{"a"}) || j.Meta["k"] != "v" || j.Attempts != 1 {
			t.Errorf("reserved job lost fields: %+v", j)
		}
		if err := q.Push(ctx, queue.Job{Queue: "mail", Name: "Send", UniqueKey: "welcome:42"}); !errors.Is(err, queue.ErrDuplicate) {
			t.Errorf("Push of a held unique key after the upgrade = %v, want ErrDuplicate", err)
		}
		if err := testutil.Ack(ctx, q, j.Lease()); err != nil {
			t.Fatalf("Ack after the upgrade: %v", err)
		}
		if dead, err := q.DeadLetters(ctx, "mail", 10); err != nil || len(dead) != 1 || dead[0].ID != "v1-dead" || dead[0].LastError != "boom" {
			t.Errorf("DeadLetters after the upgrade = %v, %v", dead, err)
		}
		// Trailing spaces count in the upgraded tables too (MySQL 0002).
		if err := q.Push(ctx, queue.Job{ID: "v1-later ", Queue: "mail ", Name: "Send"}); err != nil {
			t.Fatalf("Push of an ID that differs from a stored one in a trailing space: %v", err)
		}
		if jobs, err := q.Reserve(ctx, []string{"mail"}, 10, time.Minute); err != nil || len(jobs) != 0 {
			t.Fatalf("Reserve(mail) after pushing to \"mail \" = %v, %v; want nothing", jobs, err)
		}
		if n, err := q.Purge(ctx, "mail "); err != nil || n != 1 {
			t.Fatalf("Purge(\"mail \") = %d, %v; want 1", n, err)
		}
		if err := q.Push(ctx, queue.Job{ID: "v2-new", Queue: "mail", Name: "Send", Payload: []byte("{}")}); err != nil {
			t.Fatalf("Push after the upgrade: %v", err)
		}
		// Back down to version 1: the rows stay, and Setup brings them up again.
		count := func() int {
			t.Helper()
			var n int
			if err := db.QueryRowContext(ctx, "SELECT count(*) FROM "+s.table).Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n
		}
		before := count()
		if from, now, err := q.MigrateDown(ctx, 1); err != nil || from != latest || now != 1 {
			t.Fatalf("MigrateDown(1) = %d, %d, %v; want %d, 1", from, now, err, latest)
		}
		if n := count(); n != before {
			t.Fatalf("after the down migration the table holds %d rows; want %d", n, before)
		}
		// The down migrations restore the v1 tables exactly.
		ref := newStore(t, b)
		ref.path = s.path
		createV1(t, db, ref)
		if got, want := catalog(t, db, b.dialect, s.table), catalog(t, db, b.dialect, ref.table); !slices.Equal(got, want) {
			t.Errorf("after migrating down to 1 the tables differ from v1:\n got: %q\nwant: %q", got, want)
		}
		if err := q.Setup(ctx); err != nil {
			t.Fatalf("Setup after the down migration: %v", err)
		}
		if info, err := q.GetJob(ctx, "v2-new"); err != nil || info.State != queue.StateReady {
			t.Errorf("GetJob(v2-new) after down and up = %+v, %v", info, err)
		}
		if info, err := q.GetJob(ctx, "v1-running"); err != nil || info.State != queue.StateRunning {
			t.Errorf("GetJob(v1-running) after down and up = %+v, %v; want it still running", info, err)
		}

		// Down to 0 drops the tables.
		if _, now, err := q.MigrateDown(ctx, 0); err != nil || now != 0 {
			t.Fatalf("MigrateDown(0) = %d, %v", now, err)
		}
		if err := q.Push(ctx, queue.Job{Name: "x"}); !errors.Is(err, queue.ErrConfig) {
			t.Errorf("Push after dropping the tables = %v, want ErrConfig", err)
		}
	})
}

// TestMigration0001IsV1 checks that migration 0001 creates exactly the
// tables the release before migrations created: columns, types,
// defaults, indexes and table options, read back from the catalog.
func TestMigration0001IsV1(t *testing.T) {
	eachDialect(t, func(t *testing.T, b backend) {
		ctx := t.Context()
		old, fresh := newStore(t, b), newStore(t, b)
		if b.dialect == sqlqueue.SQLite {
			fresh.path = old.path // one file, two table sets
		}
		db := b.open(t, old.path)
		createV1(t, db, old)
		q, err := sqlqueue.New(db, sqlqueue.WithTable(fresh.table))
		if err != nil {
			t.Fatal(err)
		}
		if b.dialect != sqlqueue.SQLite {
			t.Cleanup(func() { dropTables(db, fresh.table) })
		}
		if _, now, err := q.Migrate(ctx, 1); err != nil || now != 1 {
			t.Fatalf("Migrate(1) = %d, %v", now, err)
		}
		want, got := catalog(t, db, b.dialect, old.table), catalog(t, db, b.dialect, fresh.table)
		if len(want) == 0 {
			t.Fatal("the catalog query found nothing")
		}
		if !slices.Equal(got, want) {
			t.Errorf("0001 differs from the v1 schema:\n got: %q\nwant: %q", got, want)
		}
	})
}

// catalog describes table's set (with the name replaced by T) as the
// database's catalog records it, sorted.
func catalog(t *testing.T, db *sql.DB, d sqlqueue.Dialect, table string) []string {
	t.Helper()
	var queries []string
	for _, suffix := range tableSuffixes {
		name := table + suffix
		switch d {
		case sqlqueue.Postgres:
			queries = append(queries,
				"SELECT concat_ws(' ', column_name, data_type, is_nullable, column_default, is_identity, identity_generation, ordinal_position) FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = '"+name+"'",
				"SELECT indexdef FROM pg_indexes WHERE schemaname = current_schema() AND tablename = '"+name+"'",
				// The options sorted: ALTER TABLE ... SET moves an option it
				// changes to the end of the list.
				"SELECT coalesce(array_to_string(ARRAY(SELECT o FROM unnest(reloptions) AS o ORDER BY o), ','), '') FROM pg_class WHERE oid = to_regclass('"+name+"')",
			)
		case sqlqueue.MySQL:
			// SHOW CREATE TABLE fails on a missing table (an older version
			// has fewer): ask only for the tables that exist.
			var n int
			if err := db.QueryRowContext(t.Context(), "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name = ?", name).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n > 0 {
				queries = append(queries, "SHOW CREATE TABLE "+name)
			}
		case sqlqueue.SQLite:
			queries = append(queries, "SELECT type || ' ' || name || ' ' || coalesce(sql, '') FROM sqlite_master WHERE tbl_name = '"+name+"'")
		}
	}
	var out []string
	for _, query := range queries {
		rows, err := db.QueryContext(t.Context(), query)
		if err != nil {
			t.Fatalf("%s: %v", query, err)
		}
		cols, _ := rows.Columns()
		for rows.Next() {
			vals, err := testutil.NullStrings(rows, len(cols))
			if err != nil {
				t.Fatal(err)
			}
			line := sortedKeys(vals[len(vals)-1].String)
			line = strings.ReplaceAll(line, table, "T")
			line = autoIncrement.ReplaceAllString(line, "") // the next ID, not the schema
			out = append(out, strings.Join(strings.Fields(line), " "))
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		rows.Close()
	}
	slices.Sort(out)
	return out
}

// sortedKeys sorts the KEY lines of a MySQL CREATE TABLE text among
// themselves (and drops the commas ending lines): the order in which
// indexes were made is not part of the schema (migration 0004 makes the
// claim index again, after the others).
func sortedKeys(create string) string {
	lines := strings.Split(create, "\n")
	var keys []string
	var at []int
	for i, l := range lines {
		l = strings.TrimSuffix(strings.TrimSpace(l), ",")
		lines[i] = l
		if strings.HasPrefix(l, "KEY ") || strings.HasPrefix(l, "UNIQUE KEY ") {
			keys, at = append(keys, l), append(at, i)
		}
	}
	slices.Sort(keys)
	for k, i := range at {
		lines[i] = keys[k]
	}
	return strings.Join(lines, "\n")
}

var autoIncrement = regexp.MustCompile(` AUTO_INCREMENT=[0-9]+`)

// TestSetupConcurrent runs Setup from two handles (two connection pools,
// as two processes would) at once on new tables, then again: every run
// succeeds and the tables end at the latest version.
func TestSetupConcurrent(t *testing.T) {
	eachDialect(t, func(t *testing.T, b backend) {
		ctx := t.Context()
		s := newStore(t, b)
		latest, err := sqlqueue.LatestSchemaVersion(b.dialect)
		if err != nil {
			t.Fatal(err)
		}
		var handles []*sqlqueue.Queue
		for range 2 {
			db := b.open(t, s.path)
			q, err := sqlqueue.New(db, sqlqueue.WithTable(s.table))
			if err != nil {
				t.Fatal(err)
			}
			handles = append(handles, q)
		}
		if b.dialect != sqlqueue.SQLite {
			t.Cleanup(func() { _ = handles[0].DropTables(context.Background()) })
		}
		for round := range 2 {
			var wg sync.WaitGroup
			errs := make([]error, len(handles))
			for i, q := range handles {
				wg.Go(func() { errs[i] = q.Setup(ctx) })
			}
			wg.Wait()
			for i, err := range errs {
				if err != nil {
					t.Fatalf("round %d: Setup on handle %d: %v", round, i, err)
				}
			}
		}
		for i, q := range handles {
			if got, _, err := q.SchemaVersions(ctx); err != nil || got != latest {
				t.Errorf("handle %d reads version %d, %v; want %d", i, got, err, latest)
			}
		}
		if err := handles[0].Push(ctx, queue.Job{ID: "after-setup", Name: "x"}); err != nil {
			t.Fatal(err)
		}
		if info, err := handles[1].GetJob(ctx, "after-setup"); err != nil || info.State != queue.StateReady {
			t.Errorf("GetJob through the other handle = %+v, %v", info, err)
		}
	})
}

// TestMigrateConcurrentOneMigrates runs Migrate from two handles (two
// pools, as two `meridian migrate` would) at once on new tables: one
// applies every file and the other, having waited for the lock, finds
// them in place. Runners used to take turns file by file on PostgreSQL,
// and both reported migrating.
func TestMigrateConcurrentOneMigrates(t *testing.T) {
	eachDialect(t, func(t *testing.T, b backend) {
		ctx := t.Context()
		s := newStore(t, b)
		latest, err := sqlqueue.LatestSchemaVersion(b.dialect)
		if err != nil {
			t.Fatal(err)
		}
		var handles []*sqlqueue.Queue
		for range 2 {
			q, err := sqlqueue.New(b.open(t, s.path), sqlqueue.WithTable(s.table))
			if err != nil {
				t.Fatal(err)
			}
			handles = append(handles, q)
		}
		if b.dialect != sqlqueue.SQLite {
			t.Cleanup(func() { _ = handles[0].DropTables(context.Background()) })
		}
		for round := range 3 {
			if _, _, err := handles[0].MigrateDown(ctx, 0); err != nil {
				t.Fatal(err)
			}
			type result struct{ from, now int }
			got := make([]result, len(handles))
			errs := make([]error, len(handles))
			var wg sync.WaitGroup
			for i, q := range handles {
				wg.Go(func() { got[i].from, got[i].now, errs[i] = q.Migrate(ctx, 0) })
			}
			wg.Wait()
			migrated := 0
			for i, r := range got {
				if errs[i] != nil {
					t.Fatalf("round %d: Migrate on handle %d: %v", round, i, errs[i])
				}
				if r.now != latest {
					t.Errorf("round %d: handle %d ended at version %d, want %d", round, i, r.now, latest)
				}
				if r.from != r.now {
					migrated++
					if r.from != 0 {
						t.Errorf("round %d: handle %d migrated from version %d, want 0 (the other ran some files first)", round, i, r.from)
					}
				}
			}
			if migrated != 1 {
				t.Errorf("round %d: %d handles report migrating (%+v), want 1", round, migrated, got)
			}
		}
	})
}

// TestDropTablesLeavesNothing: DropTables drops every table the migrations
// made, on every dialect (the bench and the tests tear down through it;
// it once left the results, graph and sequence tables behind).
func TestDropTablesLeavesNothing(t *testing.T) {
	t.Parallel()
	for d, open := range backends(t) {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			s := newStore(t, open(t))
			q, db := s.open(t)
			if got := catalog(t, db, d, s.table); len(got) == 0 {
				t.Fatal("the catalog lists nothing after Setup: the check below could not fail")
			}
			if err := q.DropTables(t.Context()); err != nil {
				t.Fatalf("DropTables: %v", err)
			}
			if got := catalog(t, db, d, s.table); len(got) > 0 {
				t.Errorf("left after DropTables:\n%s", strings.Join(got, "\n"))
			}
		})
	}
}
