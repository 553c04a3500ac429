package main

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/meridianjobs/meridian/internal/testutil"
)

func TestMain(m *testing.M) { testutil.Main(m) }

// TestCompareRuns runs one small round of both systems on a real server
// and checks that every figure has a value from each, with a ratio.
func TestCompareRuns(t *testing.T) {
	dsn := testutil.DSN(t, testutil.PostgresEnv)
	var out strings.Builder
	err := run(context.Background(), []string{"--postgres-dsn", dsn, "--rounds", "1", "--jobs", "2000", "--modes", "burndown,latency",
		"--rate", "200", "--latency-duration", "500ms", "--duration", "1s", "--warmup", "0s"}, &out, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	table := out.String()
	for _, fig := range []string{"burn-down: work 2000 (end to end), jobs/s", "burn-down: work 2000: client CPU per 1,000 jobs, ms", "latency p99, dispatch to start @200/s, ms"} {
		var row string
		for line := range strings.SplitSeq(table, "\n") {
			if strings.HasPrefix(line, "| "+fig+" |") {
				row = line
			}
		}
		if row == "" {
			t.Fatalf("no row %q in\n%s", fig, table)
		}
		cells := strings.Split(strings.Trim(row, "| "), " | ")
		if len(cells) != 4 || cells[1] == "" || cells[2] == "" || !strings.HasSuffix(cells[3], "x") {
			t.Errorf("row %q lacks a River value, a Meridian value or the ratio", row)
		}
	}
}

func TestParseRejectsBadFlags(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no server", []string{"--postgres-dsn", ""}, "no PostgreSQL"},
		{"zero rounds", []string{"--postgres-dsn", "postgres://x", "--rounds", "0"}, "--rounds must be at least 1"},
		{"unknown mode", []string{"--postgres-dsn", "postgres://x", "--modes", "fast"}, "unknown mode"},
		{"warm-up too long", []string{"--postgres-dsn", "postgres://x", "--duration", "1s", "--warmup", "2s"}, "--warmup must be"},
		{"stray argument", []string{"--postgres-dsn", "postgres://x", "extra"}, "unexpected arguments"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := parse(tt.args, io.Discard)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("parse(%q) = %v, want an error containing %q", tt.args, err, tt.want)
			}
		})
	}
}
