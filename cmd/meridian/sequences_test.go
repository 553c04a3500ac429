package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

type ledgerChange struct{ Cents int }

// TestSequencesCommand lists a sequence held by its dead head, releases
// it (the next member becomes ready, the release is in the dead job's
// history), and then finds nothing held.
func TestSequencesCommand(t *testing.T) {
	t.Parallel()
	dsn := fillSQLite(t)
	ctx := t.Context()
	q, err := openQueue(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	const key = "tenant/7 account 9"
	var ids []string
	for _, c := range []int{-500, 120, 30} {
		id, _, err := queue.Enqueue(ctx, q, ledgerChange{c}, queue.OnQueue("ledger"), queue.Sequence(key))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	jobs, err := q.Reserve(ctx, []string{"ledger"}, 10, time.Minute)
	if err != nil || len(jobs) != 1 {
		t.Fatalf("Reserve = %d jobs, %v; want the head alone", len(jobs), err)
	}
	c := driver.Completion{Lease: jobs[0].Lease(), Outcome: driver.OutcomeFailed, Reason: "ledger: account locked"}
	c.Sequence, c.ReleaseOnDead = driver.SequenceOf(jobs[0])
	if _, errs, err := q.Complete(ctx, nil, []driver.Completion{c}); err != nil || errs[0] != nil {
		t.Fatalf("Complete(failed): %v, %v", err, errs)
	}
	q.Close()

	code, out, stderr := runCLI(t, "", "sequences", "list", "--json", "--queue", "ledger", "--dsn", dsn)
	var list []sequenceJSON
	if code != exitOK || json.Unmarshal([]byte(out), &list) != nil || len(list) != 1 ||
		list[0].Key != key || list[0].Queue != "ledger" || list[0].Waiting != 2 || list[0].Head.ID != ids[0] || list[0].Head.State != driver.StateDead {
		t.Fatalf("sequences list --json: exit %d, %s\n%s", code, out, stderr)
	}
	if code, out, stderr := runCLI(t, "", "sequences", "list", "--dsn", dsn); code != exitOK ||
		!strings.Contains(out, `"`+key+`"`) || !strings.Contains(out, ids[0]) || !strings.Contains(out, "ledger: account locked") {
		t.Errorf("sequences list: exit %d\n%s\n%s", code, out, stderr)
	}
	if code, out, _ := runCLI(t, "", "sequences", "list", "--queue", "elsewhere", "--dsn", dsn); code != exitOK || !strings.Contains(out, "no sequence is held") {
		t.Errorf("sequences list --queue elsewhere: exit %d\n%s", code, out)
	}
	if code, out, stderr := runCLI(t, "", "sequences", "release", "ledger", key, "--dsn", dsn); code != exitOK ||
		!strings.Contains(out, "released sequence") || !strings.Contains(out, ids[0]) {
		t.Fatalf("sequences release: exit %d\n%s\n%s", code, out, stderr)
	}

	q, err = openQueue(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	insp := driver.CapabilitiesOf(q).Inspector
	next, err := insp.GetJob(ctx, ids[1])
	if err != nil || next.State != driver.StateReady {
		t.Errorf("the next member is %v, %v after the release; want ready", next.State, err)
	}
	head, err := insp.GetJob(ctx, ids[0])
	if err != nil || head.State != driver.StateDead || len(head.Actions) == 0 ||
		!strings.Contains(head.Actions[len(head.Actions)-1].What, "released its sequence") ||
		!strings.HasSuffix(head.Actions[len(head.Actions)-1].By, "(cli)") {
		t.Errorf("the dead job after the release: %v, %+v, %v; want dead with the release in its history", head.State, head.Actions, err)
	}

	if code, _, stderr := runCLI(t, "", "sequences", "release", "ledger", key, "--dsn", dsn); code != exitFailure || !strings.Contains(stderr, "not held by a dead job") {
		t.Errorf("a second release: exit %d\n%s", code, stderr)
	}
	for _, args := range [][]string{
		{"sequences"},
		{"sequences", "release", "ledger"},
		{"sequences", "list", "extra"},
		{"sequences", "drop"},
		{"sequences", "list", "--limit", "0"},
	} {
		if code, _, _ := runCLI(t, "", append(args, "--dsn", dsn)...); code != exitUsage {
			t.Errorf("%q: exit %d, want %d", args, code, exitUsage)
		}
	}
}
