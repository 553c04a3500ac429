package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// csvRow is a batch member's payload in these tests.
type csvRow struct{ Line int }

func TestBatchesCommand(t *testing.T) {
	t.Parallel()
	dsn := fillSQLite(t)
	q, err := openQueue(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	bt := queue.Batch{Name: "import", AllowFailures: true}
	for i := range 3 {
		j, err := queue.NewJob(csvRow{i}, queue.OnQueue("csv"))
		if err != nil {
			t.Fatal(err)
		}
		bt.Jobs = append(bt.Jobs, j)
	}
	id, err := queue.DispatchBatch(t.Context(), q, bt)
	if err != nil {
		t.Fatalf("DispatchBatch: %v", err)
	}
	// One member fails for good, so that there is something to retry.
	jobs, err := q.Reserve(t.Context(), []string{"csv"}, 1, time.Minute)
	if err != nil || len(jobs) != 1 {
		t.Fatalf("Reserve = %d jobs, %v", len(jobs), err)
	}
	_, errs, err := q.Complete(t.Context(), nil, []driver.Completion{{Lease: jobs[0].Lease(), Outcome: driver.OutcomeFailed, Reason: "bad line", Batch: id}})
	if err == nil {
		err = errs[0]
	}
	if err != nil {
		t.Fatalf("Complete(failed) of a member: %v", err)
	}
	q.Close()

	code, out, stderr := runCLI(t, "", "batches", "list", "--json", "--dsn", dsn)
	var list []batchJSON
	if code != exitOK || json.Unmarshal([]byte(out), &list) != nil || len(list) != 1 ||
		list[0].ID != id || list[0].Total != 3 || list[0].Pending != 2 || list[0].Failed != 1 {
		t.Fatalf("batches list --json: exit %d, %s\n%s", code, out, stderr)
	}
	if code, out, stderr := runCLI(t, "", "batches", "show", id, "--member-state", "failed", "--dsn", dsn); code != exitOK ||
		!strings.Contains(out, "2 pending, 0 done, 1 failed") || !strings.Contains(out, jobs[0].ID+"  failed") {
		t.Errorf("batches show: exit %d\n%s\n%s", code, out, stderr)
	}
	if code, out, stderr := runCLI(t, "", "batches", "retry", id, "--dsn", dsn); code != exitOK || out != "retried 1 failed members of batch "+id+"\n" {
		t.Errorf("batches retry: exit %d, %q\n%s", code, out, stderr)
	}
	// The retried member stays failed in its batch until it succeeds; the
	// two others are cancelled.
	code, out, stderr = runCLI(t, "", "batches", "cancel", id, "nope", "--dsn", dsn)
	if code != exitFailure || !strings.Contains(out, "cancelled batch "+id+": 2 of 3 members cancelled, 0 done, 1 failed") || !strings.Contains(stderr, "nope: no such batch") {
		t.Errorf("batches cancel: exit %d, %q\n%s", code, out, stderr)
	}
	if code, out, _ := runCLI(t, "", "batches", "list", "--dsn", dsn); code != exitOK || !strings.Contains(out, "cancelled") {
		t.Errorf("batches list after the cancel:\n%s", out)
	}
	for _, args := range [][]string{
		{"batches"},
		{"batches", "show"},
		{"batches", "frobnicate"},
		{"batches", "list", "--limit", "0"},
		{"batches", "show", id, "--member-state", "lost"},
	} {
		if code, _, _ := runCLI(t, "", append(args, "--dsn", dsn)...); code != exitUsage {
			t.Errorf("%v: exit %d, want %d", args, code, exitUsage)
		}
	}
}
