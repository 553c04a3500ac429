package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meridianjobs/meridian/internal/testutil"
	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/sqlqueue"
)

func TestSchemaCommand(t *testing.T) {
	t.Parallel()
	for _, d := range []string{"postgres", "mysql", "sqlite"} {
		var out, errOut bytes.Buffer
		if err := schemaMain([]string{"--dialect", d, "--table", "bg_jobs"}, &out, &errOut); err != nil {
			t.Fatalf("%s: %v", d, err)
		}
		if !strings.Contains(out.String(), "CREATE TABLE") || !strings.Contains(out.String(), "bg_jobs") {
			t.Errorf("%s: schema output lacks the table:\n%s", d, out.String())
		}
	}
	var out, errOut bytes.Buffer
	if err := schemaMain([]string{"--dialect", "oracle"}, &out, &errOut); err == nil {
		t.Error("an unknown dialect was accepted")
	}
	if err := schemaMain([]string{"--dialect", "sqlite", "--table", "x; DROP TABLE users"}, &out, &errOut); err == nil {
		t.Error("an unsafe table name was accepted")
	}
}

func TestAdminCommandsOverSQLite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := "sqlite://" + filepath.Join(t.TempDir(), "admin.db")
	run := func(fn func(context.Context, []string, *bytes.Buffer, *bytes.Buffer) error, args ...string) string {
		t.Helper()
		var out, errOut bytes.Buffer
		if err := fn(ctx, args, &out, &errOut); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, errOut.String())
		}
		return out.String()
	}
	migrate := func(ctx context.Context, a []string, o, e *bytes.Buffer) error {
		return migrateMain(ctx, a, testIO(o, e))
	}
	stats := func(ctx context.Context, a []string, o, e *bytes.Buffer) error { return statsMain(ctx, a, o, e) }
	failed := func(ctx context.Context, a []string, o, e *bytes.Buffer) error {
		return failedMain(ctx, a, testIO(o, e))
	}

	if out := run(migrate, "--dsn", dsn); !strings.Contains(out, "schema version") {
		t.Fatalf("migrate said %q", out)
	}

	// Make one dead letter and one ready job.
	q, err := openQueue(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Push(ctx, queue.Job{ID: "deadbeef", Queue: "mail", Name: "Send", Payload: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	jobs, err := q.Reserve(ctx, []string{"mail"}, 1, time.Minute)
	if err != nil || len(jobs) != 1 {
		t.Fatalf("Reserve = %v, %v", jobs, err)
	}
	if err := testutil.Fail(ctx, q, jobs[0].Lease(), "smtp: 550 mailbox unavailable"); err != nil {
		t.Fatal(err)
	}
	if err := q.Push(ctx, queue.Job{Queue: "mail", Name: "Send", Payload: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	q.Close()

	out := run(stats, "--dsn", dsn)
	if !strings.Contains(out, "mail") {
		t.Fatalf("stats lacks the queue:\n%s", out)
	}
	out = run(failed, "list", "--dsn", dsn)
	if !strings.Contains(out, "deadbeef") || !strings.Contains(out, "550 mailbox unavailable") {
		t.Fatalf("failed list:\n%s", out)
	}
	if out := run(failed, "retry", "--dsn", dsn, "deadbeef"); !strings.Contains(out, "retried deadbeef") {
		t.Fatalf("failed retry said %q", out)
	}
	if out := run(failed, "list", "--dsn", dsn); strings.Contains(out, "deadbeef") {
		t.Fatalf("a retried job is still listed:\n%s", out)
	}
	var o, e bytes.Buffer
	if err := failedMain(ctx, []string{"forget", "--dsn", dsn, "deadbeef"}, testIO(&o, &e)); err == nil {
		t.Fatal("forgetting a job that is no longer dead succeeded")
	}
	if out := run(failed, "flush", "--yes", "--dsn", dsn); !strings.Contains(out, "flushed 0") {
		t.Fatalf("flush said %q", out)
	}
}

// TestMigrateCommand walks a new SQLite database (and, when
// MERIDIAN_POSTGRES_DSN is set, PostgreSQL tables) up and down with
// meridian migrate.
func TestMigrateCommand(t *testing.T) {
	t.Parallel()
	dsns := map[string]string{"sqlite": "sqlite://" + filepath.Join(t.TempDir(), "migrate.db")}
	if pg := os.Getenv("MERIDIAN_POSTGRES_DSN"); pg != "" {
		var r [6]byte
		_, _ = rand.Read(r[:])
		sep := "?"
		if strings.Contains(pg, "?") {
			sep = "&"
		}
		dsns["postgres"] = pg + sep + "table=mc_" + hex.EncodeToString(r[:])
	}
	for name, dsn := range dsns {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			run := func(args ...string) (string, error) {
				var out, errOut bytes.Buffer
				err := migrateMain(ctx, append([]string{"--dsn", dsn}, args...), testIO(&out, &errOut))
				return out.String(), err
			}
			t.Cleanup(func() { _, _ = run("--to", "0", "--yes") })
			n, err := sqlqueue.LatestSchemaVersion(sqlqueue.Dialect(name))
			if err != nil {
				t.Fatal(err)
			}
			type step struct {
				args []string
				want string
			}
			steps := []step{
				{[]string{"--status"}, fmt.Sprintf("schema version 0 (latest %d)", n)},
				{nil, fmt.Sprintf("migrated from schema version 0 to %d (latest %d)", n, n)},
				{nil, fmt.Sprintf("tables are in place (schema version %d, latest %d)", n, n)},
				{[]string{"--down", "1", "--yes"}, fmt.Sprintf("migrated from schema version %d to %d", n, n-1)},
			}
			if n > 1 {
				steps = append(steps, step{[]string{"--to", "0", "--yes"}, fmt.Sprintf("migrated from schema version %d to 0", n-1)})
			}
			steps = append(steps,
				step{[]string{"--to", "1"}, "migrated from schema version 0 to 1"},
				step{[]string{"--status"}, fmt.Sprintf("schema version 1 (latest %d)", n)},
			)
			for _, step := range steps {
				out, err := run(step.args...)
				if err != nil || !strings.Contains(out, step.want) {
					t.Fatalf("migrate %v = %q, %v; want %q", step.args, out, err, step.want)
				}
			}
			if _, err := run("--to", fmt.Sprint(n+1)); !errors.Is(err, queue.ErrConfig) {
				t.Errorf("migrate --to %d (past the latest) = %v, want ErrConfig", n+1, err)
			}
			if _, err := run("--to", "1", "--down", "1"); err == nil {
				t.Error("migrate with both --to and --down succeeded")
			}
		})
	}
}
