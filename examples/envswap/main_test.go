package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/meridianjobs/meridian/internal/testutil"
	"github.com/meridianjobs/meridian/queue"
)

// TestRun runs the same program on every driver, changing only the URL.
func TestRun(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		url  func(t *testing.T) string
	}{
		{"memory", func(*testing.T) string { return "memory://" }},
		{"sqlite", func(t *testing.T) string { return "sqlite://" + filepath.Join(t.TempDir(), "envswap.db") }},
		{"postgres", func(t *testing.T) string {
			return testutil.QueueURL(t, testutil.PostgresEnv, testutil.Name("envswap_"))
		}},
		{"mysql", func(t *testing.T) string { return testutil.QueueURL(t, testutil.MySQLEnv, testutil.Name("envswap_")) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			url := tc.url(t)
			t.Cleanup(func() { dropTables(t, url) })
			var out bytes.Buffer
			if err := run(t.Context(), url, &out); err != nil {
				t.Fatalf("run(%s): %v", tc.name, err)
			}
			if want := "report for acme, 2026-10\n"; out.String() != want {
				t.Fatalf("output %q, want %q", out.String(), want)
			}
		})
	}
}

// TestUnknownScheme checks that a URL no driver registered is an error
// naming the schemes that are.
func TestUnknownScheme(t *testing.T) {
	t.Parallel()
	err := run(t.Context(), "redis://localhost:6379", &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "sqlite") {
		t.Fatalf("run(redis://) = %v; want an error naming the registered schemes", err)
	}
}

// dropTables drops the tables a server test created under its own name.
func dropTables(t *testing.T, url string) {
	if strings.HasPrefix(url, "memory:") || strings.HasPrefix(url, "sqlite:") {
		return
	}
	q, err := queue.Open(context.Background(), url)
	if err != nil {
		t.Errorf("reopening %s to drop its tables: %v", url, err)
		return
	}
	defer q.Close()
	if d, ok := q.(interface{ DropTables(context.Context) error }); ok {
		if err := d.DropTables(context.Background()); err != nil {
			t.Errorf("dropping the test tables: %v", err)
		}
	}
}
