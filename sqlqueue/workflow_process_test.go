package sqlqueue_test

import (
	"cmp"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/meridianjobs/meridian/internal/testutil"
	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// The workflow jobs of testdata/worker (same type names, so the same job
// names).
type (
	wfStep     struct{ N int }
	wfItem     struct{ N int }
	wfCallback struct{}
)

// waitKilled waits for p, which must end by SIGKILL, so the fleet's stop
// leaves it alone.
func waitKilled(t *testing.T, p *exec.Cmd) {
	t.Helper()
	err := p.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("worker process %d ended with %v, want killed by SIGKILL", p.Process.Pid, err)
	}
	if ws, ok := ee.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("worker process %d ended with %v, want killed by SIGKILL", p.Process.Pid, err)
	}
}

// merged reads the handlings of every fleet.
func merged(fleets ...*fleet) map[string][]handling {
	out := map[string][]handling{}
	for _, fl := range fleets {
		for k, hs := range fl.handled() {
			out[k] = append(out[k], hs...)
		}
	}
	return out
}

// TestChainSurvivesSIGKILL runs a 3-step chain across worker processes
// killed with SIGKILL: the first kills itself the moment step 1 is acked
// and step 2 stored (between two steps); the second is killed while it
// holds step 2; a third finishes the chain. Every step completes once, in
// order, step 2 on a later attempt.
func TestChainSurvivesSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("starts worker processes; skipped with -short")
	}
	t.Parallel() // overlaps the package's other process tests' waits
	eachDialect(t, func(t *testing.T, b backend) {
		s := newStore(t, b)
		q := s.queue(t)
		var c queue.Chain
		for n := 1; n <= 3; n++ {
			j, err := queue.NewJob(wfStep{n})
			if err != nil {
				t.Fatal(err)
			}
			c.Steps = append(c.Steps, j)
		}
		if _, err := queue.DispatchChain(t.Context(), q, c); err != nil {
			t.Fatalf("DispatchChain: %v", err)
		}
		lease := time.Second
		first := startFleet(t, b, s, 1, lease, 0, "WORKER_KILL_AFTER_STEP=1")
		waitKilled(t, first.procs[0])
		if got := first.handled()["step-1"]; len(got) != 1 {
			t.Fatalf("the first process completed step 1 %d times before it was killed, want once", len(got))
		}
		second := startFleet(t, b, s, 1, lease, 0, "WORKER_HOLD_STEP=2")
		testutil.Eventually(t, time.Minute, func() bool { return second.held() > 0 }, "the second process held no step")
		if err := second.procs[0].Process.Kill(); err != nil {
			t.Fatal(err)
		}
		waitKilled(t, second.procs[0])
		third := startFleet(t, b, s, 1, lease, 0)
		if !testutil.WaitFor(time.Minute, func() bool { return len(third.handled()["step-3"]) > 0 }) {
			t.Fatalf("the chain did not finish within a minute of the kills: %v", merged(first, second, third))
		}
		waitDrained(t, q, time.Minute)
		third.stop()
		got := merged(first, second, third)
		var steps [4]handling
		for n := 1; n <= 3; n++ {
			hs := got[fmt.Sprintf("step-%d", n)]
			if len(hs) != 1 {
				t.Fatalf("step %d completed %d times, want once: %v", n, len(hs), got)
			}
			steps[n] = hs[0]
		}
		if !(steps[1].end <= steps[2].start && steps[2].end <= steps[3].start) {
			t.Errorf("the steps ran out of order: %+v", steps[1:])
		}
		if steps[2].attempt < 2 {
			t.Errorf("step 2 completed on attempt %d, want a later one than the killed process's", steps[2].attempt)
		}
		if dead, err := q.DeadLetters(t.Context(), "", 10); err != nil || len(dead) != 0 {
			t.Errorf("dead letters %v, %v; want none", dead, err)
		}
	})
}

// TestBatchAcrossProcesses has three worker processes finish a batch of
// 1,000 members: each member once, then and finally once each, no catch,
// and the batch's counters right.
func TestBatchAcrossProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts worker processes; skipped with -short")
	}
	t.Parallel() // overlaps the package's other process tests' waits
	eachDialect(t, func(t *testing.T, b backend) {
		s := newStore(t, b)
		q := s.queue(t)
		const n = 1000
		var bt queue.Batch
		for i := range n {
			j, err := queue.NewJob(wfItem{i})
			if err != nil {
				t.Fatal(err)
			}
			bt.Jobs = append(bt.Jobs, j)
		}
		for _, cb := range []**queue.Job{&bt.Then, &bt.Catch, &bt.Finally} {
			j, err := queue.NewJob(wfCallback{})
			if err != nil {
				t.Fatal(err)
			}
			*cb = &j
		}
		id, err := queue.DispatchBatch(t.Context(), q, bt)
		if err != nil {
			t.Fatalf("DispatchBatch: %v", err)
		}
		fl := startFleet(t, b, s, 3, time.Minute, 0)
		var info driver.BatchInfo
		if !testutil.WaitFor(3*time.Minute, func() bool {
			var err error
			if info, err = q.GetBatch(t.Context(), id); err != nil {
				t.Fatal(err)
			}
			return info.Finished()
		}) {
			t.Fatalf("the batch did not finish: %+v", info)
		}
		waitDrained(t, q, time.Minute) // the callbacks
		fl.stop()
		got := fl.handled()
		ids := make([]string, n)
		for i := range ids {
			ids[i] = fmt.Sprintf("item-%d", i)
		}
		if dups := checkHandled(t, ids, got); dups != 0 {
			t.Errorf("%d members handled more than once without any crash", dups)
		}
		for ev, want := range map[string]int{"then": 1, "finally": 1, "catch": 0} {
			if hs := got["cb-"+ev]; len(hs) != want {
				t.Errorf("the %s callback ran %d times, want %d", ev, len(hs), want)
			}
		}
		info, err = q.GetBatch(t.Context(), id)
		if err != nil || info.Total != n || info.Done != n || info.Pending != 0 || info.ThenAt.IsZero() {
			t.Errorf("the batch ended as %+v, %v; want %d done and then due", info, err, n)
		}
		per := make([]int, 3)
		for i := range per {
			per[i] = fl.handledBy(i)
		}
		t.Logf("%s: members and callbacks handled per process: %v", b.dialect, per)
	})
}

// starts returns the start times of every handling the fleet logged, in
// Unix nanoseconds, sorted.
func (fl *fleet) starts() []int64 {
	var out []int64
	for _, hs := range fl.handled() {
		for _, h := range hs {
			out = append(out, h.start)
		}
	}
	slices.Sort(out)
	return out
}

// TestLimitsAcrossProcesses checks queue.Limiter's limits across three
// worker processes (the suite's Limiters and RateAcrossProcesses use three
// handles in one process): a rate of 50 a second never starts more than 50
// in a second, and a concurrency limit of 2 never has 3 handlers running,
// judged from the handlers' own start and end times.
func TestLimitsAcrossProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts worker processes; skipped with -short")
	}
	t.Parallel() // overlaps the package's other process tests' waits
	eachDialect(t, func(t *testing.T, b backend) {
		t.Run("Rate", func(t *testing.T) {
			s := newStore(t, b)
			q := s.queue(t)
			const n, per = 50, time.Second
			// A handler logs its start after the store granted the slot;
			// on a loaded machine one process's record can lag another's,
			// so windows are judged that much shorter. Without the limit
			// the 700 jobs start within a second or two.
			const slack = 250 * time.Millisecond
			pushJobs(t, q, 700)
			fl := startFleetEnv(t, b, s, 3, time.Minute, 0, []string{"WORKER_RATE=50"})
			// More than three windows' worth of starts proves the slots are
			// freed after their second, and the test waits for that many
			// rather than for a time: a CI machine stalled for seconds
			// (MariaDB under the other process tests, 28 Nov) starts fewer
			// in a fixed period without any fault of the limiter's.
			const want = 3*n + 1
			testutil.Eventually(t, 2*time.Minute, func() bool { return len(fl.starts()) >= want },
				"fewer than %d jobs started: the rate's slots are not freed after their second", want)
			fl.stop()
			starts := fl.starts()
			for i := 0; i+n < len(starts); i++ {
				if d := time.Duration(starts[i+n] - starts[i]); d < per-slack {
					t.Fatalf("%d jobs started within %s: more than %d per %s across 3 processes", n+1, d, n, per)
				}
			}
			took := time.Duration(starts[len(starts)-1] - starts[0])
			t.Logf("%s: %d starts in %s across 3 processes (the limit allows %d a second)", b.dialect, len(starts), took.Round(time.Millisecond), n)
		})
		t.Run("Concurrency", func(t *testing.T) {
			s := newStore(t, b)
			q := s.queue(t)
			const limit = 2
			ids := pushJobs(t, q, 40)
			fl := startFleetEnv(t, b, s, 3, time.Minute, 50*time.Millisecond, []string{"WORKER_CONCURRENCY_LIMIT=2"})
			waitDrained(t, q, 2*time.Minute)
			fl.stop()
			got := fl.handled()
			checkHandled(t, ids, got)
			// A handler's logged run lies within the time it held its
			// slot, so three overlapping runs prove three slots held.
			type edge struct {
				at   int64
				step int
			}
			var edges []edge
			for _, hs := range got {
				for _, h := range hs {
					edges = append(edges, edge{h.start, 1}, edge{h.end, -1})
				}
			}
			slices.SortFunc(edges, func(a, b edge) int {
				if a.at != b.at {
					return cmp.Compare(a.at, b.at)
				}
				return cmp.Compare(a.step, b.step) // an end before a start at the same instant
			})
			running, most := 0, 0
			for _, e := range edges {
				running += e.step
				most = max(most, running)
			}
			if most > limit {
				t.Errorf("%d handlers ran at once across 3 processes, want at most %d", most, limit)
			}
			t.Logf("%s: at most %d handlers ran at once", b.dialect, most)
		})
	})
}
