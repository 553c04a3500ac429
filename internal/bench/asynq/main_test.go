package main

import (
	"context"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/meridianjobs/meridian/internal/testutil"
)

func TestMain(m *testing.M) { testutil.Main(m) }

// redisAddr returns MERIDIAN_REDIS_ADDR, skipping the test when it is
// unset (failing it when CI=true).
func redisAddr(t *testing.T) string {
	addr := os.Getenv("MERIDIAN_REDIS_ADDR")
	if addr == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("MERIDIAN_REDIS_ADDR is not set (CI=true needs every server)")
		}
		t.Skip("MERIDIAN_REDIS_ADDR is not set: skipping")
	}
	return addr
}

// TestCompareRuns runs one small round of both systems on a real server
// and checks that every figure has a value from each, with a ratio.
func TestCompareRuns(t *testing.T) {
	var out strings.Builder
	err := run(context.Background(), []string{"--redis-addr", redisAddr(t), "--redis-db", "14", "--rounds", "1", "--jobs", "2000",
		"--modes", "burndown,latency", "--rate", "200", "--latency-duration", "500ms", "--duration", "1s", "--warmup", "0s",
		"--concurrency", "50", "--memory-jobs", "0"}, &out, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	table := out.String()
	for _, fig := range []string{"burn-down: work 2000 (end to end), jobs/s", "burn-down: work 2000: server CPU per 1,000 jobs, ms",
		"burn-down: queue 2000: store memory per queued job, B", "latency p99, dispatch to start @200/s, ms"} {
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
		if len(cells) != 4 || cells[1] == "" || cells[2] == "" {
			t.Errorf("row %q lacks an asynq or a Meridian value", row)
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
		{"no server", []string{"--redis-addr", ""}, "no Redis"},
		{"nothing to measure", []string{"--redis-addr", "x:1", "--rounds", "0", "--memory-jobs", "0"}, "one of them positive"},
		{"negative rounds", []string{"--redis-addr", "x:1", "--rounds", "-1"}, "must be at least 0"},
		{"negative memory jobs", []string{"--redis-addr", "x:1", "--memory-jobs", "-5"}, "must be at least 0"},
		{"unknown mode", []string{"--redis-addr", "x:1", "--modes", "fast"}, "unknown mode"},
		{"fail-once", []string{"--redis-addr", "x:1", "--modes", "failonce"}, "not compared"},
		{"negative db", []string{"--redis-addr", "x:1", "--redis-db", "-1"}, "--redis-db"},
		{"warm-up too long", []string{"--redis-addr", "x:1", "--duration", "1s", "--warmup", "2s"}, "--warmup must be"},
		{"stray argument", []string{"--redis-addr", "x:1", "extra"}, "unexpected arguments"},
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
