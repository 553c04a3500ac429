package sqlqueue_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/meridianjobs/meridian/queue"
)

// TestBatchStepSurvivesSIGKILL runs a chain whose middle step is a batch
// of 60 members (Batch.Step) across worker processes killed with
// SIGKILL: the first kills itself the moment step 1 is acked and the
// batch step stored; then rounds of three kill themselves at their 8th
// member, two inside the handler before the ack (a duplicate run) and one
// right after an ack. Every member runs, step 3 (which takes the batch's
// Then's place; Finally comes beside it) comes after every member ran, and
// each step, member and callback is pushed once: at most one of its runs
// is a first attempt.
func TestBatchStepSurvivesSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("starts worker processes; skipped with -short")
	}
	t.Parallel() // overlaps the package's other process tests' waits
	eachDialect(t, func(t *testing.T, b backend) {
		s := newStore(t, b)
		q := s.queue(t)
		const n = 60
		var bt queue.Batch
		ids := make([]string, n)
		for i := range n {
			j, err := queue.NewJob(wfItem{i}, killProof)
			if err != nil {
				t.Fatal(err)
			}
			bt.Jobs = append(bt.Jobs, j)
			ids[i] = fmt.Sprintf("item-%d", i)
		}
		fin, err := queue.NewJob(wfCallback{})
		if err != nil {
			t.Fatal(err)
		}
		bt.Finally = &fin
		step, err := bt.Step()
		if err != nil {
			t.Fatal(err)
		}
		var c queue.Chain
		for _, n := range []int{1, 0, 3} {
			if n == 0 {
				c.Steps = append(c.Steps, step)
				continue
			}
			j, err := queue.NewJob(wfStep{n})
			if err != nil {
				t.Fatal(err)
			}
			c.Steps = append(c.Steps, j)
		}
		if _, err := queue.DispatchChain(t.Context(), q, c); err != nil {
			t.Fatalf("DispatchChain: %v", err)
		}

		first := startFleet(t, b, s, 1, time.Second, 0, "WORKER_KILL_AFTER_STEP=1")
		waitKilled(t, first.procs[0])
		drained := func() bool {
			n, err := q.Len(t.Context(), "")
			if err != nil {
				t.Fatal(err)
			}
			return n == 0
		}
		rounds, kills := killRounds(t, 10*time.Minute, drained, func() *fleet {
			return startFleetEnv(t, b, s, 3, time.Second, 0, []string{"WORKER_KILL_AFTER_ITEMS=8"}, "WORKER_KILL_AT=ack")
		})
		fleets := append([]*fleet{first}, rounds...)
		got := merged(fleets...)

		extra := checkHandled(t, ids, got)
		for _, key := range append([]string{"step-1", "step-3", "cb-finally"}, ids...) {
			hs := got[key]
			firsts := 0
			for _, h := range hs {
				if h.attempt == 1 {
					firsts++
				}
			}
			if len(hs) == 0 || firsts > 1 {
				t.Errorf("%s ran %d times, %d of them first attempts; want at least once and one first attempt at most (pushed once)", key, len(hs), firsts)
			}
		}
		if len(got["step-3"]) == 0 {
			dead, err := q.DeadLetters(t.Context(), "", 100)
			var why []string
			for _, d := range dead {
				why = append(why, fmt.Sprintf("%s %s attempts %d: %s", d.ID, d.Name, d.Attempts, d.LastError))
			}
			t.Fatalf("the queue drained and step 3 never ran (dead letters %v, %v): %v", why, err, got)
		}
		step3 := got["step-3"][0].start
		for _, key := range append([]string{"step-1"}, ids...) {
			ran := false
			for _, h := range got[key] {
				ran = ran || h.end <= step3
			}
			if !ran {
				t.Errorf("step 3 started before %s had run", key)
			}
		}
		if dead, err := q.DeadLetters(t.Context(), "", 10); err != nil || len(dead) != 0 {
			t.Errorf("dead letters %v, %v; want none", dead, err)
		}
		if kills == 0 {
			t.Errorf("no member's process was killed: the test proved nothing")
		}
		t.Logf("%s: %d members over %d SIGKILLs after the one between the steps; %d duplicate member runs", b.dialect, n, kills, extra)
	})
}
