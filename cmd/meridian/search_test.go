package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/meridianjobs/meridian/queue/driver"
)

// TestSearchCommand: search status, enable and disable on SQLite say what
// they did and do it; a bad verb is a usage error; a store without the
// index (Redis, MySQL) says so.
func TestSearchCommand(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := "sqlite://" + filepath.Join(t.TempDir(), "search.db")
	var out, errOut bytes.Buffer
	if err := migrateMain(ctx, []string{"--dsn", dsn}, testIO(&out, &errOut)); err != nil {
		t.Fatal(err, errOut.String())
	}
	for _, step := range []struct{ verb, want string }{
		{"status", "search index: off"},
		{"enable", "search index: on"},
		{"status", "search index: on"},
		{"enable", "search index: on"},
		{"disable", "search index: off"},
		{"status", "search index: off"},
	} {
		out.Reset()
		if err := searchMain(ctx, []string{step.verb, "--dsn", dsn}, testIO(&out, &errOut)); err != nil {
			t.Fatalf("search %s: %v", step.verb, err)
		}
		if !strings.HasPrefix(out.String(), step.want) {
			t.Fatalf("search %s said %q, want %q", step.verb, out.String(), step.want)
		}
	}
	err := searchMain(ctx, []string{"on", "--dsn", dsn}, testIO(&out, &errOut))
	if exitCode(err) != 2 {
		t.Fatalf("search on = %v (exit %d), want a usage error (exit 2)", err, exitCode(err))
	}
	err = searchMain(ctx, []string{"status", "--dsn", "memory://"}, testIO(&out, &errOut))
	if err == nil || errors.Is(err, driver.ErrUnsupported) {
		t.Fatalf("search status on memory:// = %v, want the usage error of a read command", err)
	}
}

// TestJobsListSearch: jobs list --search takes a substring or field
// filters, in JSON or as a table; a field filter that does not parse is
// a usage error (exit 2) saying where.
func TestJobsListSearch(t *testing.T) {
	t.Parallel()
	dsn := fillSQLite(t) // cafe {"to":"bob"} ready, deadbeef {"to":"ada"} dead
	for _, tc := range []struct {
		args []string
		want string // the IDs listed, space-separated
	}{
		{[]string{"--search", `payload.to = "bob"`}, "cafe"},
		{[]string{"--search", `payload.to != "bob"`}, ""},
		{[]string{"--search", "bob"}, "cafe"},
		{[]string{"--state", "dead", "--search", `payload.to = "ada" AND "ada"`}, "deadbeef"},
	} {
		args := append([]string{"jobs", "list", "--json", "--dsn", dsn}, tc.args...)
		code, out, stderr := runCLI(t, "", args...)
		var rows []jobJSON
		if err := json.Unmarshal([]byte(out), &rows); code != exitOK || err != nil {
			t.Fatalf("%v: exit %d, %v\n%s%s", tc.args, code, err, out, stderr)
		}
		var ids []string
		for _, r := range rows {
			ids = append(ids, r.ID)
		}
		if got := strings.Join(ids, " "); got != tc.want {
			t.Errorf("jobs list %v = %q, want %q", tc.args, got, tc.want)
		}
	}
	code, _, stderr := runCLI(t, "", "jobs", "list", "--search", "payload.to = bob", "--dsn", dsn)
	if code != exitUsage || !strings.Contains(stderr, `bad search: at position 14: expected a value`) {
		t.Errorf("jobs list with a bad filter: exit %d, %q; want %d and the position", code, stderr, exitUsage)
	}
}
