package main

import (
	"bytes"
	"context"
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
