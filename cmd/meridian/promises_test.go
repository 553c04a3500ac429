package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The promises docs/cli.md makes about destructive commands, read-only
// commands and errors, each tested as a user would meet it.

func TestDevNullIsNoTerminal(t *testing.T) {
	t.Parallel()
	f, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if isTerminal(f) {
		t.Errorf("%s was taken for a terminal: `purge --all < /dev/null` would prompt instead of refusing", os.DevNull)
	}
}

// inTerminal runs args as if a person typed answer at a terminal.
func inTerminal(t *testing.T, answer string, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(t.Context(), args, stdio{out: &out, errOut: &errOut, in: strings.NewReader(answer), inTerminal: true})
	return code, out.String(), errOut.String()
}

func TestMigrateDownConfirms(t *testing.T) {
	t.Parallel()
	dsn := fillSQLite(t)
	version := func() string {
		t.Helper()
		code, out, stderr := runCLI(t, "", "migrate", "--status", "--dsn", dsn)
		if code != exitOK {
			t.Fatalf("migrate --status: exit %d\n%s", code, stderr)
		}
		return out
	}
	before := version()
	for _, args := range [][]string{{"--to", "0"}, {"--down", "1"}} {
		args = append([]string{"migrate", "--dsn", dsn}, args...)
		if code, _, stderr := runCLI(t, "y\n", args...); code != exitUsage || !strings.Contains(stderr, "--yes") {
			t.Errorf("%v without a terminal: exit %d, want %d naming --yes\n%s", args, code, exitUsage, stderr)
		}
		if code, _, stderr := inTerminal(t, "n\n", args...); code != exitFailure || !strings.Contains(stderr, "[y/N]") {
			t.Errorf("%v answered n: exit %d, want %d after a question\n%s", args, code, exitFailure, stderr)
		}
		if v := version(); v != before {
			t.Fatalf("%v unconfirmed changed the schema: %q, was %q", args, v, before)
		}
	}
	if code, _, stderr := inTerminal(t, "n\n", "migrate", "--to", "0", "--dsn", dsn); !strings.Contains(stderr, "drops the tables and every job") {
		t.Errorf("the question before --to 0 does not say what is lost (exit %d):\n%s", code, stderr)
	}
	if code, out, stderr := runCLI(t, "", "failed", "list", "--dsn", dsn); code != exitOK || !strings.Contains(out, "deadbeef") {
		t.Fatalf("the jobs are gone after unconfirmed migrations: exit %d, %q\n%s", code, out, stderr)
	}
	if code, out, stderr := inTerminal(t, "y\n", "migrate", "--to", "0", "--dsn", dsn); code != exitOK || !strings.Contains(out, "to 0") {
		t.Errorf("migrate --to 0 answered y: exit %d, %q\n%s", code, out, stderr)
	}
	// Migrating up destroys nothing and asks nothing.
	if code, out, stderr := runCLI(t, "", "migrate", "--dsn", dsn); code != exitOK || !strings.Contains(out, "migrated") {
		t.Errorf("migrate up without a terminal: exit %d, %q\n%s", code, out, stderr)
	}
}

func TestFailedFlushConfirms(t *testing.T) {
	t.Parallel()
	dsn := fillSQLite(t)
	if code, _, stderr := runCLI(t, "y\n", "failed", "flush", "--dsn", dsn); code != exitUsage || !strings.Contains(stderr, "--yes") {
		t.Errorf("failed flush without a terminal: exit %d, want %d naming --yes\n%s", code, exitUsage, stderr)
	}
	if code, _, stderr := inTerminal(t, "no\n", "failed", "flush", "--dsn", dsn); code != exitFailure || !strings.Contains(stderr, "[y/N]") {
		t.Errorf("failed flush answered no: exit %d\n%s", code, stderr)
	}
	if code, out, _ := runCLI(t, "", "failed", "list", "--dsn", dsn); code != exitOK || !strings.Contains(out, "deadbeef") {
		t.Fatalf("an unconfirmed flush removed the dead letter:\n%s", out)
	}
	if code, out, stderr := inTerminal(t, "yes\n", "failed", "flush", "--dsn", dsn); code != exitOK || out != "flushed 1 dead letters\n" {
		t.Errorf("failed flush answered yes: exit %d, %q\n%s", code, out, stderr)
	}
}

func TestStatusCreatesNothing(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "missing.db")
	code, out, stderr := runCLI(t, "", "migrate", "--status", "--dsn", "sqlite://"+path)
	if code != exitOK || !strings.Contains(out, "schema version 0 (latest") || !strings.Contains(out, "no database file") {
		t.Errorf("migrate --status of a missing file: exit %d, %q\n%s", code, out, stderr)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("migrate --status created %s (stat: %v)", path, err)
	}
}

func TestMissingDirectoryNamed(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "no", "such")
	dsn := "sqlite://" + filepath.Join(dir, "jobs.db")
	for _, args := range [][]string{{"migrate"}, {"migrate", "--status"}, {"stats"}, {"failed", "list"}} {
		code, _, stderr := runCLI(t, "", append(args, "--dsn", dsn)...)
		if code != exitFailure || !strings.Contains(stderr, "no directory "+dir) {
			t.Errorf("%v in a missing directory: exit %d, want %d naming %s:\n%s", args, code, exitFailure, dir, stderr)
		}
	}
	if _, err := os.Stat(filepath.Dir(dir)); !os.IsNotExist(err) {
		t.Errorf("a command created %s", filepath.Dir(dir))
	}
}

// TestMemoryNotOffered checks that no command but bench names memory:// as
// a queue it takes, in its help or in its errors, since none accepts it.
func TestMemoryNotOffered(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"stats", "-h"}, {"failed", "-h"}, {"stats", "--dsn", "nonsense"}, {"stats", "--dsn", ""}, {"stats", "--dsn", "memory://"}} {
		_, out, stderr := runCLI(t, "", args...)
		if strings.Contains(out+stderr, "memory://") && !strings.Contains(stderr, "a memory:// queue lives inside one process") {
			t.Errorf("%v offers memory://:\n%s%s", args, out, stderr)
		}
	}
}
