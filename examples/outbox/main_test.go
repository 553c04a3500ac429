package main

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/meridianjobs/meridian/internal/testutil"
)

// TestRun runs the program on each database/sql driver, on tables of its
// own, and checks what it prints.
func TestRun(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		driver string
		dsn    func(t *testing.T) string
	}{
		{"sqlite", func(t *testing.T) string { return filepath.Join(t.TempDir(), "outbox.db") }},
		{"pgx", func(t *testing.T) string { return testutil.DSN(t, testutil.PostgresEnv) }},
		{"mysql", func(t *testing.T) string { return testutil.DSN(t, testutil.MySQLEnv) }},
	} {
		t.Run(tc.driver, func(t *testing.T) {
			t.Parallel()
			var out bytes.Buffer
			if err := run(t.Context(), tc.driver, tc.dsn(t), testutil.Name("outbox_"), true, &out); err != nil {
				t.Fatalf("run: %v\noutput so far:\n%s", err, out.String())
			}
			want := "jobs after a declined order: 0\n" +
				"receipt for order A-2 (4500 cents)\n" +
				"jobs after the worker: 0\n"
			if out.String() != want {
				t.Fatalf("output:\n%s\nwant:\n%s", out.String(), want)
			}
		})
	}
}
