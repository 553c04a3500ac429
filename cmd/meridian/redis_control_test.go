package main

import (
	"strings"
	"testing"
	"time"

	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// TestRedisControl runs the commands that steer work (pause, resume,
// jobs cancel) on a redis:// queue, which has the Controller ability.
func TestRedisControl(t *testing.T) {
	t.Parallel()
	dsn := redisDSN(t)
	q, err := queue.Open(t.Context(), dsn)
	if err != nil {
		t.Fatalf("queue.Open(%s): %v", dsn, err)
	}
	defer q.Close()
	ctl := driver.CapabilitiesOf(q).Controller
	if ctl == nil {
		t.Fatal("a redis:// queue has no Controller")
	}

	if code, out, errOut := runCLI(t, "", "pause", "mail", "reports", "--dsn", dsn); code != exitOK || out != "paused queue mail\npaused queue reports\n" {
		t.Fatalf("pause: exit %d, %q\n%s", code, out, errOut)
	}
	if code, out, errOut := runCLI(t, "", "resume", "mail", "--dsn", dsn); code != exitOK || out != "resumed queue mail\n" {
		t.Fatalf("resume: exit %d, %q\n%s", code, out, errOut)
	}
	if got, err := ctl.Paused(t.Context()); err != nil || len(got) != 1 || got[0] != "reports" {
		t.Errorf("after pause and resume the paused queues are %q, %v; want [reports]", got, err)
	}

	ready := queue.Job{ID: driver.NewID(), Name: "n", Payload: []byte(`{}`)}
	running := queue.Job{ID: driver.NewID(), Name: "n", Queue: "run", Payload: []byte(`{}`)}
	for _, j := range []queue.Job{ready, running} {
		if err := q.Push(t.Context(), j); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := q.Reserve(t.Context(), []string{"run"}, 1, time.Minute); err != nil || len(got) != 1 {
		t.Fatalf("Reserve = %d jobs, %v", len(got), err)
	}
	code, out, errOut := runCLI(t, "", "jobs", "cancel", ready.ID, running.ID, "nope", "--dsn", dsn)
	if code != exitFailure || !strings.Contains(out, "cancelled "+ready.ID+" (was ready)") ||
		!strings.Contains(out, "cancelled "+running.ID+" (running") || !strings.Contains(errOut, "nope: no such job") {
		t.Errorf("jobs cancel: exit %d, %q\n%s", code, out, errOut)
	}
	if n, err := q.Len(t.Context(), ""); err != nil || n != 0 {
		t.Errorf("after the cancels Len = %d, %v; want 0", n, err)
	}
}
