package main

import (
	"strings"
	"testing"

	"github.com/meridianjobs/meridian/queue/driver"
)

func TestWorkersCommands(t *testing.T) {
	t.Parallel()
	dsn := fillSQLite(t)
	q, err := openQueue(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	if err := q.(driver.Reporter).Heartbeat(t.Context(), driver.WorkerInfo{ID: "w1", Host: "web-1", PID: 7, Queues: []string{"mail"}, Concurrency: 4}); err != nil {
		t.Fatal(err)
	}
	orders := func(id string) driver.WorkerOrders {
		t.Helper()
		o, err := q.(driver.Fleet).WorkerOrders(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	if code, out, stderr := runCLI(t, "", "workers", "pause", "--dsn", dsn); code != exitOK || !strings.Contains(out, "paused every worker") {
		t.Fatalf("workers pause: exit %d, %q\n%s", code, out, stderr)
	}
	if !orders("w1").Paused {
		t.Fatal("workers pause did not pause the fleet")
	}
	if code, out, stderr := runCLI(t, "", "workers", "list", "--json", "--dsn", dsn); code != exitOK || !strings.Contains(out, `"id":"w1"`) || !strings.Contains(out, `"paused":true`) {
		t.Fatalf("workers list --json: exit %d, %q\n%s", code, out, stderr)
	}
	if code, out, stderr := runCLI(t, "", "workers", "continue", "--dsn", dsn); code != exitOK || orders("w1").Paused {
		t.Fatalf("workers continue: exit %d, %q\n%s; paused %v", code, out, stderr, orders("w1").Paused)
	}
	if code, out, stderr := runCLI(t, "", "workers", "terminate", "w1", "--dsn", dsn); code != exitOK || !orders("w1").Terminate {
		t.Fatalf("workers terminate w1: exit %d, %q\n%s", code, out, stderr)
	}
	if code, _, stderr := runCLI(t, "", "workers", "terminate", "nope", "--dsn", dsn); code != exitFailure || !strings.Contains(stderr, "no worker nope") {
		t.Fatalf("workers terminate of an unknown worker: exit %d\n%s", code, stderr)
	}
	if code, _, _ := runCLI(t, "", "workers", "terminate", "--dsn", dsn); code != exitOK || orders("w1").Terminations != 1 {
		t.Fatalf("workers terminate: exit %d, orders %+v", code, orders("w1"))
	}
	if code, _, _ := runCLI(t, "", "workers", "reboot", "--dsn", dsn); code != exitUsage {
		t.Errorf("workers reboot: exit %d, want %d", code, exitUsage)
	}
}
