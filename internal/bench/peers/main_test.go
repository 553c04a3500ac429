package main

import (
	"bytes"
	"context"
	"io"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/meridianjobs/meridian/internal/testutil"
)

func TestMain(m *testing.M) { testutil.Main(m, waitGoqiteExtenders) }

// waitGoqiteExtenders waits, at most 10 s, until goqite's runners have no
// goroutine left. goqite starts one per job that extends the job's
// timeout; it sleeps 4 s (Extend less a fifth) before it sees that the job
// is over, so it outlives its job, and the leak check would catch it.
func waitGoqiteExtenders() {
	buf := make([]byte, 1<<22)
	testutil.WaitFor(10*time.Second, func() bool {
		return !bytes.Contains(buf[:runtime.Stack(buf, true)], []byte("maragu.dev/goqite/jobs.(*Runner)"))
	})
}

// TestCompareGue runs one small round of gue and Meridian on a real
// PostgreSQL server.
func TestCompareGue(t *testing.T) {
	t.Parallel()
	dsn := testutil.DSN(t, testutil.PostgresEnv)
	out := compareTiny(t, "gue", "--postgres-dsn", dsn, "--gue-poll", "20ms")
	if !strings.Contains(out, "gue/v5 v5.8.0 against Meridian on postgres") {
		t.Errorf("the header does not name gue's version and the store:\n%s", out)
	}
}

// TestCompareNeoq runs one small round of neoq and Meridian on a real
// PostgreSQL server, Meridian keeping done jobs as neoq does.
func TestCompareNeoq(t *testing.T) {
	t.Parallel()
	dsn := testutil.DSN(t, testutil.PostgresEnv)
	out := compareTiny(t, "neoq", "--postgres-dsn", dsn, "--neoq-pending-check", "200ms", "--keep-done")
	for _, want := range []string{"neoq v0.72.2 against Meridian on postgres", "keeps done jobs"} {
		if !strings.Contains(out, want) {
			t.Errorf("the header does not say %q:\n%s", want, out)
		}
	}
}

// TestCompareGoqite runs one small round of goqite and Meridian on SQLite
// files.
func TestCompareGoqite(t *testing.T) {
	t.Parallel()
	out := compareTiny(t, "goqite", "--goqite-poll", "20ms")
	if !strings.Contains(out, "goqite v0.4.0 against Meridian on sqlite") {
		t.Errorf("the header does not name goqite's version and the store:\n%s", out)
	}
}

// compareTiny runs one small round of peer and Meridian with args added,
// checks that every figure has a value from each system with a ratio, and
// returns the output.
func compareTiny(t *testing.T, peer string, args ...string) string {
	t.Helper()
	var out strings.Builder
	err := run(context.Background(), append([]string{"--peer", peer, "--rounds", "1", "--jobs", "500", "--modes", "burndown,latency",
		"--rate", "100", "--latency-duration", "500ms", "--duration", "1s", "--warmup", "0s", "--concurrency", "10"}, args...), &out, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	table := out.String()
	for _, fig := range []string{"burn-down: work 500 (end to end), jobs/s", "burn-down: work 500: client CPU per 1,000 jobs, ms", "latency p99, dispatch to start @100/s, ms"} {
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
			t.Errorf("row %q lacks a %s value, a Meridian value or the ratio", row, peer)
		}
	}
	return table
}

func TestParse(t *testing.T) {
	t.Parallel()
	c, err := parse([]string{"--peer", "goqite", "--postgres-dsn", ""}, io.Discard)
	if err != nil {
		t.Fatalf("goqite needs no PostgreSQL DSN: %v", err)
	}
	if c.peer.store != "sqlite" || c.keepDone || c.settings.goqitePoll != 100*time.Millisecond {
		t.Errorf("goqite's config is store %q, keepDone %v, poll %s; want sqlite, false, goqite's 100ms", c.peer.store, c.keepDone, c.settings.goqitePoll)
	}
	c, err = parse([]string{"--peer", "neoq", "--postgres-dsn", "postgres://x", "--keep-done"}, io.Discard)
	if err != nil || c.peer.store != "postgres" || !c.keepDone || c.settings.neoqPendingCheck != time.Minute || c.settings.guePoll != 5*time.Second {
		t.Errorf("neoq's config is %+v (%v); want postgres, keepDone, the peers' default intervals", c, err)
	}
	if c.settings.gueRunAt {
		t.Error("gue's poll strategy defaults to runat; want its own default, priority")
	}
	if c.settings.concurrency != c.opts.Concurrency {
		t.Errorf("the peer's concurrency is %d; want --concurrency's %d without --peer-concurrency", c.settings.concurrency, c.opts.Concurrency)
	}
	c, err = parse([]string{"--peer", "gue", "--postgres-dsn", "postgres://x", "--gue-strategy", "runat", "--peer-concurrency", "16"}, io.Discard)
	if err != nil || c.settings.concurrency != 16 || c.opts.Concurrency != 1000 || !strings.Contains(c.peerText(), "its 16 workers") {
		t.Errorf("--peer-concurrency 16: peer %d, Meridian %d, header %q (%v); want 16 and 1000", c.settings.concurrency, c.opts.Concurrency, c.peerText(), err)
	}
	if err != nil || !c.settings.gueRunAt || !strings.Contains(c.peerText(), "RunAtPollStrategy") {
		t.Errorf("--gue-strategy runat: runAt %v, header %q (%v); want RunAtPollStrategy named", c.settings.gueRunAt, c.peerText(), err)
	}
}

func TestParseRejectsBadFlags(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no peer", []string{"--postgres-dsn", "postgres://x"}, "--peer must be gue, neoq or goqite"},
		{"River", []string{"--peer", "river", "--postgres-dsn", "postgres://x"}, "--peer must be"},
		{"no server", []string{"--peer", "gue", "--postgres-dsn", ""}, "no PostgreSQL for gue"},
		{"zero rounds", []string{"--peer", "gue", "--postgres-dsn", "postgres://x", "--rounds", "0"}, "--rounds must be at least 1"},
		{"unknown mode", []string{"--peer", "gue", "--postgres-dsn", "postgres://x", "--modes", "fast"}, "unknown mode"},
		{"flood", []string{"--peer", "goqite", "--modes", "flood"}, "not compared with peers"},
		{"zero poll", []string{"--peer", "goqite", "--goqite-poll", "0s"}, "--goqite-poll must be positive"},
		{"negative peer concurrency", []string{"--peer", "goqite", "--peer-concurrency", "-1"}, "--peer-concurrency must not be negative"},
		{"gue strategy", []string{"--peer", "gue", "--postgres-dsn", "postgres://x", "--gue-strategy", "fifo"}, "--gue-strategy must be priority or runat"},
		{"warm-up too long", []string{"--peer", "goqite", "--duration", "1s", "--warmup", "2s"}, "--warmup must be"},
		{"stray argument", []string{"--peer", "goqite", "extra"}, "unexpected arguments"},
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
