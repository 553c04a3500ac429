package main

import (
	"context"
	"io"
	"strconv"
	"strings"
	"testing"

	"github.com/meridianjobs/meridian/internal/testutil"
)

func TestMain(m *testing.M) { testutil.Main(m) }

// TestCompareRuns runs one small round of both systems on a real
// PostgreSQL server and checks that every figure has a value from each,
// with a ratio.
func TestCompareRuns(t *testing.T) {
	dsn := testutil.DSN(t, testutil.PostgresEnv)
	out := compareTiny(t, 1000, "--postgres-dsn", dsn)
	if !strings.Contains(out, "River v0.51.2 against Meridian on postgres") {
		t.Errorf("the header does not name River's version and the store:\n%s", out)
	}
}

// TestCompareRunsSQLite runs one small round of both systems on SQLite
// files, Meridian keeping done jobs. It works 100 jobs, not 1,000:
// riversqlite completes jobs one statement each, and under the race
// detector (which instruments modernc.org/sqlite's translated C) 1,000 of
// them took River's Stop past the harness's one-minute limit.
func TestCompareRunsSQLite(t *testing.T) {
	t.Parallel()
	out := compareTiny(t, 100, "--store", "sqlite", "--keep-done")
	for _, want := range []string{"on sqlite", "riversqlite", "keeps done jobs"} {
		if !strings.Contains(out, want) {
			t.Errorf("the header does not say %q:\n%s", want, out)
		}
	}
}

// compareTiny runs one small round of jobs jobs with args added and checks
// the table's rows; it returns the output.
func compareTiny(t *testing.T, jobs int, args ...string) string {
	t.Helper()
	var out strings.Builder
	n := strconv.Itoa(jobs)
	err := run(context.Background(), append([]string{"--rounds", "1", "--jobs", n, "--modes", "burndown,latency",
		"--rate", "200", "--latency-duration", "500ms", "--duration", "1s", "--warmup", "0s"}, args...), &out, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	table := out.String()
	for _, fig := range []string{"burn-down: work " + n + " (end to end), jobs/s", "burn-down: work " + n + ": client CPU per 1,000 jobs, ms", "latency p99, dispatch to start @200/s, ms"} {
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
	return table
}

func TestParseStore(t *testing.T) {
	t.Parallel()
	c, err := parse([]string{"--store", "sqlite", "--postgres-dsn", "", "--keep-done"}, io.Discard)
	if err != nil {
		t.Fatalf("SQLite needs no PostgreSQL DSN: %v", err)
	}
	if c.store != "sqlite" || !c.keepDone {
		t.Errorf("parse gave store %q, keepDone %v; want sqlite, true", c.store, c.keepDone)
	}
	c, err = parse([]string{"--postgres-dsn", "postgres://x"}, io.Discard)
	if err != nil || c.store != "postgres" || c.keepDone || c.opts.Dispatchers != 8 {
		t.Errorf("the defaults are store %q, keepDone %v, %d dispatchers (%v); want postgres, false, 8", c.store, c.keepDone, c.opts.Dispatchers, err)
	}
	c, err = parse([]string{"--postgres-dsn", "postgres://x", "--rate", "10000", "--dispatchers", "100"}, io.Discard)
	if err != nil || c.opts.Rate != 10000 || c.opts.Dispatchers != 100 {
		t.Errorf("--rate 10000 --dispatchers 100 gave rate %d, %d dispatchers (%v)", c.opts.Rate, c.opts.Dispatchers, err)
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
		{"zero dispatchers", []string{"--postgres-dsn", "postgres://x", "--dispatchers", "0"}, "--dispatchers must be at least 1"},
		{"unknown mode", []string{"--postgres-dsn", "postgres://x", "--modes", "fast"}, "unknown mode"},
		{"warm-up too long", []string{"--postgres-dsn", "postgres://x", "--duration", "1s", "--warmup", "2s"}, "--warmup must be"},
		{"unknown store", []string{"--store", "mysql"}, "--store must be postgres or sqlite"},
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
