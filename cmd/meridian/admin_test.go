package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meridianjobs/meridian/queue"
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
	migrate := func(ctx context.Context, a []string, o, e *bytes.Buffer) error { return migrateMain(ctx, a, o, e) }
	stats := func(ctx context.Context, a []string, o, e *bytes.Buffer) error { return statsMain(ctx, a, o, e) }
	failed := func(ctx context.Context, a []string, o, e *bytes.Buffer) error { return failedMain(ctx, a, o, e) }

	if out := run(migrate, "--dsn", dsn); !strings.Contains(out, "schema version") {
		t.Fatalf("migrate said %q", out)
	}

	// Make one dead letter and one ready job.
	q, closeFn, err := openQueue(ctx, dsn)
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
	if err := q.Fail(ctx, jobs[0].Lease(), "smtp: 550 mailbox unavailable"); err != nil {
		t.Fatal(err)
	}
	if err := q.Push(ctx, queue.Job{Queue: "mail", Name: "Send", Payload: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	closeFn()

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
	if err := failedMain(ctx, []string{"forget", "--dsn", dsn, "deadbeef"}, &o, &e); err == nil {
		t.Fatal("forgetting a job that is no longer dead succeeded")
	}
	if out := run(failed, "flush", "--dsn", dsn); !strings.Contains(out, "flushed 0") {
		t.Fatalf("flush said %q", out)
	}
}
