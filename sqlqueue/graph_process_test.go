package sqlqueue_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/meridianjobs/meridian/dag"
	"github.com/meridianjobs/meridian/internal/testutil"
	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
	"github.com/meridianjobs/meridian/sqlqueue"
)

// wfNode is a graph's node job of testdata/worker (same type name).
type wfNode struct{ N int }

// layered returns a graph of layers × width nodes: each node after the
// first layer depends on fanIn nodes of the layer before (chosen with a
// fixed seed), so nodes fan in and out. It returns the graph and each
// node's dependencies by node number.
func layered(t *testing.T, layers, width, fanIn int) (*dag.Graph, [][]int) {
	t.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	g := dag.New(fmt.Sprintf("layered %dx%d", layers, width))
	deps := make([][]int, layers*width)
	for l := range layers {
		for i := range width {
			n := l*width + i
			j, err := queue.NewJob(wfNode{n})
			if err != nil {
				t.Fatal(err)
			}
			// Every process a SIGKILL test starts dies, and a node whose
			// attempt had started in it is charged that attempt, as
			// promised. An unlucky node running at five kills used up the
			// default five attempts and was dead-lettered (MariaDB, CI
			// 28 Nov), failing a check that is about the graph, not the
			// attempts: the nodes get more attempts than any run kills
			// processes.
			j.MaxAttempts = 1000
			var after []string
			if l > 0 {
				for _, k := range rng.Perm(width)[:fanIn] {
					d := (l-1)*width + k
					deps[n] = append(deps[n], d)
					after = append(after, fmt.Sprint(d))
				}
			}
			g.Add(fmt.Sprint(n), j, dag.After(after...))
		}
	}
	return g, deps
}

// checkGraphRuns judges the handlings of a graph's nodes: every node ran;
// no node ran before one of its dependencies had finished a run; no node
// was pushed twice (two runs on a first attempt: each push starts at
// attempt 1, a run again after a lost lease at 2 or more). It returns the
// number of runs beyond the first, the duplicates the kills caused.
func checkGraphRuns(t *testing.T, deps [][]int, got map[string][]handling) (extra int) {
	t.Helper()
	firstEnd := make([]int64, len(deps))
	for n := range deps {
		hs := got[fmt.Sprintf("node-%d", n)]
		if len(hs) == 0 {
			t.Fatalf("node %d never ran", n)
		}
		extra += len(hs) - 1
		firsts := 0
		firstEnd[n] = hs[0].end
		for _, h := range hs {
			firstEnd[n] = min(firstEnd[n], h.end)
			if h.attempt == 1 {
				firsts++
			}
		}
		if firsts > 1 {
			t.Errorf("node %d ran %d times on a first attempt: it was pushed more than once", n, firsts)
		}
	}
	for n, ds := range deps {
		start := got[fmt.Sprintf("node-%d", n)][0].start
		for _, h := range got[fmt.Sprintf("node-%d", n)] {
			start = min(start, h.start)
		}
		for _, d := range ds {
			if start < firstEnd[d] {
				t.Errorf("node %d started before its dependency %d had finished a run", n, d)
			}
		}
	}
	return extra
}

// waitGraph waits until graph id has finished and returns it.
func waitGraph(t *testing.T, q *sqlqueue.Queue, id string, within time.Duration) driver.GraphInfo {
	t.Helper()
	var info driver.GraphInfo
	if !testutil.WaitFor(within, func() bool {
		var err error
		if info, _, err = q.GetGraph(t.Context(), id); err != nil {
			t.Fatal(err)
		}
		return info.Finished()
	}) {
		t.Fatalf("the graph did not finish within %s: %+v", within, info)
	}
	return info
}

// TestGraphSurvivesSIGKILL runs a graph of 300 nodes (10 layers of 30,
// each node after 3 of the layer before) over rounds of three worker
// processes that each kill themselves with SIGKILL at their 12th node:
// two inside the handler before the ack (the node runs again: a
// duplicate run, counted apart) and one right after an ack (between a
// node and its dependants). Every node runs, after its dependencies, and
// is pushed once; the graph ends with every node done.
func TestGraphSurvivesSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("starts worker processes; skipped with -short")
	}
	t.Parallel() // overlaps the package's other process tests' waits
	eachDialect(t, func(t *testing.T, b backend) {
		s := newStore(t, b)
		q := s.queue(t)
		g, deps := layered(t, 10, 30, 3)
		id, err := dag.Dispatch(t.Context(), q, g)
		if err != nil {
			t.Fatalf("dag.Dispatch: %v", err)
		}
		finished := func() bool {
			info, _, err := q.GetGraph(t.Context(), id)
			if err != nil {
				t.Fatal(err)
			}
			return info.Finished()
		}
		// Each round ends when its processes have killed themselves (or
		// the graph finished), so the rounds are bounded by the nodes
		// left; the deadline only stops a graph that no longer moves. On
		// a loaded 2-core machine MariaDB's rounds took more than the 4
		// minutes this once allowed.
		fleets, kills := killRounds(t, 10*time.Minute, finished, func() *fleet {
			return startFleetEnv(t, b, s, 3, time.Second, 0, []string{"WORKER_KILL_AFTER_NODES=12"}, "WORKER_KILL_AT=ack")
		})
		info := waitGraph(t, q, id, time.Minute)
		if info.Done != info.Total || info.Total != len(deps) {
			t.Fatalf("the graph ended as %+v, want all %d nodes done", info, len(deps))
		}
		runs := merged(fleets...)
		extra := checkGraphRuns(t, deps, runs)
		most := 0 // the highest attempt a node ran at: what the kills cost one node
		for _, hs := range runs {
			for _, h := range hs {
				most = max(most, h.attempt)
			}
		}
		if kills == 0 {
			t.Errorf("no process was killed: the test proved nothing")
		}
		if n, err := q.Len(t.Context(), ""); err != nil || n != 0 {
			t.Errorf("Len = %d, %v after the graph; want 0", n, err)
		}
		t.Logf("%s: %d nodes done once each in the store over %d SIGKILLs; %d duplicate handler runs (runs again after a kill before the ack); a node ran at attempt %d at most",
			b.dialect, info.Done, kills, extra, most)
	})
}

// TestGraph10kAcrossProcesses runs a graph of 10,000 nodes (100 layers of
// 100, each node after 3 of the layer before: 29,700 dependencies) over
// three worker processes on SQLite and PostgreSQL: every node done, each
// after its dependencies and pushed once. It takes minutes (2 on
// PostgreSQL, 7.5 on SQLite at load 16), so by default it runs 1,000
// nodes (10 layers); MERIDIAN_GRAPH_10K=1 runs the 10,000.
func TestGraph10kAcrossProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts worker processes; skipped with -short")
	}
	t.Parallel() // overlaps the package's other process tests' waits
	eachDialect(t, func(t *testing.T, b backend) {
		if b.dialect == sqlqueue.MySQL {
			t.Skip("the 10,000-node run is on SQLite and PostgreSQL; MariaDB runs TestGraphSurvivesSIGKILL")
		}
		s := newStore(t, b)
		q := s.queue(t)
		layers := 10
		if os.Getenv("MERIDIAN_GRAPH_10K") == "1" {
			layers = 100
		}
		g, deps := layered(t, layers, 100, 3)
		start := time.Now()
		id, err := dag.Dispatch(t.Context(), q, g)
		if err != nil {
			t.Fatalf("dag.Dispatch: %v", err)
		}
		dispatched := time.Since(start)
		fl := startFleet(t, b, s, 3, time.Minute, 0)
		info := waitGraph(t, q, id, 10*time.Minute)
		took := time.Since(start)
		fl.stop()
		if info.Done != len(deps) || info.Total != len(deps) {
			t.Fatalf("the graph ended as %+v, want all %d nodes done", info, len(deps))
		}
		if extra := checkGraphRuns(t, deps, fl.handled()); extra != 0 {
			t.Errorf("%d duplicate runs without any crash", extra)
		}
		per := make([]int, 3)
		for i := range per {
			per[i] = fl.handledBy(i)
		}
		t.Logf("%s: %d nodes done in %s (dispatch %s), per process %v", b.dialect, len(deps), took.Round(time.Millisecond), dispatched.Round(time.Millisecond), per)
	})
}
