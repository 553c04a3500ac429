package main

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

func TestPauseAndResumeCommands(t *testing.T) {
	t.Parallel()
	dsn := fillSQLite(t)
	paused := func() []string {
		t.Helper()
		q, err := openQueue(t.Context(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer q.Close()
		names, err := q.(driver.Controller).Paused(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		return names
	}
	if code, out, stderr := runCLI(t, "", "pause", "mail", "reports", "--dsn", dsn); code != exitOK || out != "paused queue mail\npaused queue reports\n" {
		t.Fatalf("pause: exit %d, %q\n%s", code, out, stderr)
	}
	if got := paused(); !slices.Equal(got, []string{"mail", "reports"}) {
		t.Errorf("after pause the paused queues are %q", got)
	}
	if code, out, stderr := runCLI(t, "", "resume", "--dsn", dsn, "mail"); code != exitOK || out != "resumed queue mail\n" {
		t.Fatalf("resume: exit %d, %q\n%s", code, out, stderr)
	}
	if got := paused(); !slices.Equal(got, []string{"reports"}) {
		t.Errorf("after resume the paused queues are %q", got)
	}
	if code, _, _ := runCLI(t, "", "pause", "--dsn", dsn); code != exitUsage {
		t.Errorf("pause without a queue: exit %d, want %d", code, exitUsage)
	}
}

func TestJobsCancelCommand(t *testing.T) {
	t.Parallel()
	dsn := fillSQLite(t)
	// cafe is ready, deadbeef is dead, nope does not exist: the ready job
	// is cancelled, the others are reported, and the exit code says so.
	code, out, stderr := runCLI(t, "", "jobs", "cancel", "cafe", "deadbeef", "nope", "--dsn", dsn)
	if code != exitFailure || out != "cancelled cafe (was ready)\n" ||
		!strings.Contains(stderr, "deadbeef: already finished") || !strings.Contains(stderr, "nope: no such job") {
		t.Errorf("jobs cancel: exit %d, %q\n%s", code, out, stderr)
	}
	if code, out, _ := runCLI(t, "", "jobs", "show", "cafe", "--json", "--dsn", dsn); code != exitOK || !strings.Contains(out, `"state": "cancelled"`) {
		t.Errorf("the cancelled job shows as:\n%s", out)
	}
	if code, _, _ := runCLI(t, "", "jobs", "cancel", "--dsn", dsn); code != exitUsage {
		t.Errorf("jobs cancel without an ID: exit %d, want %d", code, exitUsage)
	}
}

func TestPeriodicListCommand(t *testing.T) {
	t.Parallel()
	dsn := fillSQLite(t)
	if code, out, stderr := runCLI(t, "", "periodic", "list", "--json", "--dsn", dsn); code != exitOK || strings.TrimSpace(out) != "[]" {
		t.Fatalf("periodic list with none: exit %d, %q\n%s", code, out, stderr)
	}
	q, err := openQueue(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	ps := q.(driver.Scheduler)
	tick := time.Date(2026, 11, 24, 3, 0, 0, 0, time.UTC)
	info := driver.PeriodicInfo{Name: "nightly-report", Schedule: "cron 0 3 * * * UTC", NextTick: tick}
	if _, err := ps.RegisterPeriodic(t.Context(), info); err != nil {
		t.Fatal(err)
	}
	info.LastTick, info.NextTick = tick, tick.Add(24*time.Hour)
	if ok, err := ps.ClaimTick(t.Context(), info, queue.Job{ID: "tick1", Queue: "reports", Name: "Report"}); !ok || err != nil {
		t.Fatalf("ClaimTick = %v, %v", ok, err)
	}
	q.Close()

	code, out, stderr := runCLI(t, "", "periodic", "list", "--json", "--dsn", dsn)
	var rows []periodicJSON
	if err := json.Unmarshal([]byte(out), &rows); code != exitOK || err != nil {
		t.Fatalf("periodic list --json: exit %d, %v\n%s%s", code, err, out, stderr)
	}
	if len(rows) != 1 || rows[0].Name != "nightly-report" || rows[0].LastJobID != "tick1" || rows[0].LastState != queue.StateReady ||
		rows[0].LastTick == nil || !rows[0].LastTick.Equal(tick) || rows[0].NextTick == nil || !rows[0].NextTick.Equal(tick.Add(24*time.Hour)) {
		t.Errorf("periodic list --json = %+v", rows)
	}
	code, out, _ = runCLI(t, "", "periodic", "list", "--dsn", dsn)
	if code != exitOK || !strings.Contains(out, "nightly-report  cron 0 3 * * * UTC  2026-11-24T03:00:00Z  2026-11-25T03:00:00Z  tick1") {
		t.Errorf("periodic list:\n%s", out)
	}
}

func TestPeriodicControlCommands(t *testing.T) {
	t.Parallel()
	dsn := fillSQLite(t)
	q, err := openQueue(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	tpl, err := driver.EncodePeriodicTemplate(queue.Job{Queue: "reports", Name: "Report", Payload: []byte(`{"day":1}`)})
	if err != nil {
		t.Fatal(err)
	}
	ps := q.(driver.Scheduler)
	if _, err := ps.RegisterPeriodic(t.Context(), driver.PeriodicInfo{Name: "nightly", Schedule: "every 24h", Template: tpl}); err != nil {
		t.Fatal(err)
	}
	if _, err := ps.RegisterPeriodic(t.Context(), driver.PeriodicInfo{Name: "old", Schedule: "every 1h"}); err != nil {
		t.Fatal(err)
	}
	q.Close()
	if code, out, stderr := runCLI(t, "", "periodic", "pause", "nightly", "--dsn", dsn); code != exitOK || out != "paused periodic job nightly\n" {
		t.Fatalf("periodic pause: exit %d, %q\n%s", code, out, stderr)
	}
	if code, out, _ := runCLI(t, "", "periodic", "list", "--dsn", dsn); code != exitOK || !strings.Contains(out, "paused") {
		t.Errorf("periodic list does not show the pause:\n%s", out)
	}
	code, out, stderr := runCLI(t, "", "periodic", "run", "nightly", "--dsn", dsn)
	if code != exitOK || !strings.HasPrefix(out, "ran periodic job nightly now: job ") || !strings.HasSuffix(out, " on queue reports\n") {
		t.Fatalf("periodic run: exit %d, %q\n%s", code, out, stderr)
	}
	if code, out, _ := runCLI(t, "", "stats", "--json", "--dsn", dsn); code != exitOK || !strings.Contains(out, `"queue": "reports"`) {
		t.Errorf("after periodic run, stats show no reports queue:\n%s", out)
	}
	if code, out, stderr := runCLI(t, "", "periodic", "resume", "nightly", "--dsn", dsn); code != exitOK || out != "resumed periodic job nightly\n" {
		t.Errorf("periodic resume: exit %d, %q\n%s", code, out, stderr)
	}
	for _, tt := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"periodic", "pause", "nope"}, exitFailure, "not found"},
		{[]string{"periodic", "run", "old"}, exitFailure, "no job template"},
		{[]string{"periodic", "run"}, exitUsage, "name an action"},
		{[]string{"periodic", "explode", "nightly"}, exitUsage, "name an action"},
	} {
		code, _, stderr := runCLI(t, "", append(tt.args, "--dsn", dsn)...)
		if code != tt.code || !strings.Contains(stderr, tt.want) {
			t.Errorf("%v: exit %d, want %d with %q:\n%s", tt.args, code, tt.code, tt.want, stderr)
		}
	}
}
