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

// jobs retry (with a new payload), jobs run-now and failed retry of a
// cancelled job: each job changed once, recorded in its history as the
// CLI user's; a payload that is not JSON and a job in the wrong state
// change nothing.
func TestJobsRetryAndRunNowCommands(t *testing.T) {
	t.Parallel()
	dsn := fillSQLite(t)
	ctx := t.Context()
	q, err := openQueue(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	if err := q.Push(ctx, queue.Job{ID: "later", Queue: "mail", Name: "Send", Payload: []byte(`{}`), AvailableAt: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	job := func(id string) driver.JobInfo {
		t.Helper()
		j, err := q.(driver.Inspector).GetJob(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return j
	}

	if code, _, stderr := runCLI(t, "", "jobs", "retry", "deadbeef", "--payload", "{not json", "--dsn", dsn); code != exitUsage || !strings.Contains(stderr, "not JSON") {
		t.Errorf("retry with a payload that is not JSON: exit %d\n%s", code, stderr)
	}
	if code, _, _ := runCLI(t, "", "jobs", "retry", "deadbeef", "cafe", "--payload", "{}", "--dsn", dsn); code != exitUsage {
		t.Errorf("one payload for two jobs: exit %d, want %d", code, exitUsage)
	}
	if j := job("deadbeef"); j.State != queue.StateDead || string(j.Payload) != `{"to":"ada"}` {
		t.Fatalf("refused retries changed the job: %s %s", j.State, j.Payload)
	}
	code, out, stderr := runCLI(t, "", "jobs", "retry", "deadbeef", "--payload", `{"to":"eve"}`, "--dsn", dsn)
	if code != exitOK || out != "retried deadbeef\n" {
		t.Fatalf("jobs retry --payload: exit %d, %q\n%s", code, out, stderr)
	}
	j := job("deadbeef")
	if j.State != queue.StateReady || string(j.Payload) != `{"to":"eve"}` || len(j.Actions) != 1 ||
		!strings.HasSuffix(j.Actions[0].By, "(cli)") || !strings.Contains(j.Actions[0].What, "payload replaced") {
		t.Errorf("after jobs retry --payload: %s %s, actions %+v", j.State, j.Payload, j.Actions)
	}

	// cafe is ready: a retry does not apply; later is scheduled.
	code, out, stderr = runCLI(t, "", "jobs", "run-now", "later", "cafe", "--dsn", dsn)
	if code != exitFailure || out != "ran now later (was scheduled)\n" || !strings.Contains(stderr, "cafe") {
		t.Errorf("jobs run-now: exit %d, %q\n%s", code, out, stderr)
	}
	if j := job("later"); j.State != queue.StateReady || len(j.Actions) != 1 {
		t.Errorf("after run-now: %s, actions %+v", j.State, j.Actions)
	}
	if code, out, _ := runCLI(t, "", "jobs", "show", "later", "--dsn", dsn); code != exitOK || !strings.Contains(out, "actions:") || !strings.Contains(out, "(cli): run now from the CLI") {
		t.Errorf("jobs show does not print the action:\n%s", out)
	}
	if code, out, _ := runCLI(t, "", "jobs", "show", "later", "--json", "--dsn", dsn); code != exitOK || !strings.Contains(out, `"what": "run now from the CLI"`) {
		t.Errorf("jobs show --json does not carry the action:\n%s", out)
	}

	// The issue's `failed retry <cancelled-id>`.
	if code, _, stderr := runCLI(t, "", "jobs", "cancel", "cafe", "--dsn", dsn); code != exitOK {
		t.Fatalf("jobs cancel: exit %d\n%s", code, stderr)
	}
	code, out, stderr = runCLI(t, "", "failed", "retry", "cafe", "--dsn", dsn)
	if code != exitOK || out != "retried cafe (was cancelled)\n" {
		t.Errorf("failed retry of a cancelled job: exit %d, %q\n%s", code, out, stderr)
	}
	if j := job("cafe"); j.State != queue.StateReady {
		t.Errorf("after failed retry the cancelled job is %s", j.State)
	}

	// jobs clone: a copy under a new ID, both histories recording it; an
	// unknown ID is named and the others are still cloned.
	code, out, stderr = runCLI(t, "", "jobs", "clone", "deadbeef", "nosuch", "--dsn", dsn)
	newID, ok := strings.CutPrefix(strings.TrimSpace(out), "cloned deadbeef as ")
	if code != exitFailure || !ok || newID == "" || !strings.Contains(stderr, "nosuch: no such job") {
		t.Fatalf("jobs clone: exit %d, %q\n%s", code, out, stderr)
	}
	c, orig := job(newID), job("deadbeef")
	if c.State != queue.StateReady || c.Name != orig.Name || c.QueueName() != orig.QueueName() || string(c.Payload) != string(orig.Payload) {
		t.Errorf("clone: %s %s %s %s; original %s %s %s", c.State, c.QueueName(), c.Name, c.Payload, orig.QueueName(), orig.Name, orig.Payload)
	}
	if len(c.Actions) != 1 || c.Actions[0].What != "cloned from deadbeef from the CLI" || !strings.HasSuffix(c.Actions[0].By, "(cli)") {
		t.Errorf("clone's actions %+v", c.Actions)
	}
	if n := len(orig.Actions); n == 0 || orig.Actions[n-1].What != "cloned as "+newID {
		t.Errorf("original's actions %+v, want the clone noted last", orig.Actions)
	}
	if code, _, _ := runCLI(t, "", "jobs", "clone", "--dsn", dsn); code != exitUsage {
		t.Errorf("jobs clone without an ID: exit %d, want %d", code, exitUsage)
	}
}
