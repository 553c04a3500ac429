package contracttest

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/meridianjobs/meridian/dag"
	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// graphItem is the node job of the graph checks, on queue "g".
type graphItem struct{ Node string }

// node returns a node job for the graph checks.
func node(t *testing.T, name string) queue.Job {
	t.Helper()
	j, err := queue.NewJob(graphItem{name}, queue.OnQueue("g"))
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// diamond is a → (b, c) → d.
func diamond(t *testing.T) *dag.Graph {
	return dag.New("diamond").
		Add("a", node(t, "a")).
		Add("b", node(t, "b"), dag.After("a")).
		Add("c", node(t, "c"), dag.After("a")).
		Add("d", node(t, "d"), dag.After("b", "c"))
}

// readyNodes reserves every ready job of queue "g" and returns them by
// node name, failing on a node pushed twice.
func readyNodes(t *testing.T, q queue.Queue) map[string]queue.Job {
	t.Helper()
	out := map[string]queue.Job{}
	for {
		jobs := reserve(t, q, []string{"g"}, 100, longLease)
		if len(jobs) == 0 {
			return out
		}
		for _, j := range jobs {
			_, n := dag.Of(&j)
			if _, twice := out[n]; twice {
				t.Fatalf("node %s was pushed twice", n)
			}
			out[n] = j
		}
	}
}

// wantReady checks that the jobs ready are those of the nodes named.
func wantReady(t *testing.T, what string, got map[string]queue.Job, names ...string) {
	t.Helper()
	var have []string
	for n := range got {
		have = append(have, n)
	}
	slices.Sort(have)
	slices.Sort(names)
	if !slices.Equal(have, names) {
		t.Fatalf("%s: nodes %v ready, want %v", what, have, names)
	}
}

// finishNode records outcome o of node job j through Complete.
func finishNode(t *testing.T, q queue.Queue, j queue.Job, o driver.Outcome, result []byte) {
	t.Helper()
	id, name := dag.Of(&j)
	c := driver.Completion{Lease: j.Lease(), Outcome: o, Graph: id, Reason: "boom"}
	if result != nil {
		c.Result, c.ResultUntil = result, time.Now().Add(time.Hour)
	}
	if err := completeOne(t.Context(), q, c); err != nil {
		t.Fatalf("Complete(%s) of node %s: %v", o, name, err)
	}
}

// states reads graph id's nodes' states by name.
func states(t *testing.T, g driver.Graphs, id string) (driver.GraphInfo, map[string]driver.NodeState) {
	t.Helper()
	info, nodes, err := g.GetGraph(t.Context(), id)
	if err != nil {
		t.Fatalf("GetGraph(%s): %v", id, err)
	}
	out := map[string]driver.NodeState{}
	for _, n := range nodes {
		out[n.Name] = n.State
	}
	return info, out
}

// wantStates checks graph id's nodes' states.
func wantStates(t *testing.T, g driver.Graphs, id, what string, want map[string]driver.NodeState) driver.GraphInfo {
	t.Helper()
	info, got := states(t, g, id)
	for n, s := range want {
		if got[n] != s {
			t.Errorf("%s: node %s is %s, want %s (all: %v)", what, n, got[n], s, got)
		}
	}
	sum := driver.GraphInfo{Total: len(got)}
	for _, s := range got {
		sum.Count(s, 1)
	}
	if info.Total != sum.Total || info.Waiting != sum.Waiting || info.Pending != sum.Pending || info.Done != sum.Done ||
		info.Failed != sum.Failed || info.Cancelled != sum.Cancelled {
		t.Errorf("%s: counters %+v, nodes say %+v", what, info, sum)
	}
	return info
}

// dispatchGraph dispatches g on q.
func dispatchGraph(t *testing.T, p queue.Pusher, g *dag.Graph) string {
	t.Helper()
	id, err := dag.Dispatch(t.Context(), p, g)
	if err != nil {
		t.Fatalf("dag.Dispatch: %v", err)
	}
	return id
}

type ns = map[string]driver.NodeState

const (
	nWaiting   = driver.NodeWaiting
	nPending   = driver.NodePending
	nDone      = driver.NodeDone
	nFailed    = driver.NodeFailed
	nCancelled = driver.NodeCancelled
)

// testGraphs checks graphs (package dag, driver.Graphs): a node is pushed
// once all its dependencies succeeded; a failure cancels the dependants
// (or counts as satisfied for AllowFailed ones); a cancelled job cancels
// its dependants; a graph can be cancelled and its failed nodes retried;
// a transition happens once, also when two processes finish a fan-in's
// dependencies at once; dispatch is atomic, also in a transaction;
// dependants read their dependencies' results; bad graphs are refused.
func (s *suite) testGraphs(t *testing.T) {
	checkAs(s, t, "ReadyWhenDependenciesDone", func(t *testing.T, q queue.Queue, g driver.Graphs) {
		id := dispatchGraph(t, q, diamond(t))
		info := wantStates(t, g, id, "after dispatch", ns{"a": nPending, "b": nWaiting, "c": nWaiting, "d": nWaiting})
		if info.Name != "diamond" || info.Total != 4 || info.CreatedAt.IsZero() || info.Finished() {
			t.Errorf("after dispatch the graph is %+v", info)
		}
		r := readyNodes(t, q)
		wantReady(t, "after dispatch", r, "a")
		finishNode(t, q, r["a"], driver.OutcomeDone, nil)
		r = readyNodes(t, q)
		wantReady(t, "after a", r, "b", "c")
		finishNode(t, q, r["b"], driver.OutcomeDone, nil)
		wantReady(t, "after b alone", readyNodes(t, q))
		wantStates(t, g, id, "after b", ns{"a": nDone, "b": nDone, "c": nPending, "d": nWaiting})
		finishNode(t, q, r["c"], driver.OutcomeDone, nil)
		r = readyNodes(t, q)
		wantReady(t, "after b and c", r, "d")
		finishNode(t, q, r["d"], driver.OutcomeDone, nil)
		info = wantStates(t, g, id, "at the end", ns{"a": nDone, "b": nDone, "c": nDone, "d": nDone})
		if !info.Finished() || !info.Succeeded() {
			t.Errorf("at the end the graph is %+v, want finished and succeeded", info)
		}
		wantLen(t, q, "g", 0)
	})
	checkAs(s, t, "OutcomeOnce", func(t *testing.T, q queue.Queue, g driver.Graphs) {
		id := dispatchGraph(t, q, diamond(t))
		r := readyNodes(t, q)
		finishNode(t, q, r["a"], driver.OutcomeDone, nil)
		err := completeOne(t.Context(), q, driver.Completion{Lease: r["a"].Lease(), Outcome: driver.OutcomeDone, Graph: id})
		if !errors.Is(err, queue.ErrLeaseLost) {
			t.Errorf("a second Complete of node a: %v, want ErrLeaseLost", err)
		}
		wantReady(t, "after a twice", readyNodes(t, q), "b", "c")
		wantStates(t, g, id, "after a twice", ns{"a": nDone, "b": nPending, "c": nPending, "d": nWaiting})
	})
	checkAs(s, t, "FailureCancelsDependants", func(t *testing.T, q queue.Queue, g driver.Graphs) {
		id := dispatchGraph(t, q, dag.New("fail").
			Add("a", node(t, "a")).
			Add("b", node(t, "b"), dag.After("a")).
			Add("c", node(t, "c"), dag.After("b")).
			Add("d", node(t, "d"), dag.After("a"), dag.AllowFailed()).
			Add("e", node(t, "e"), dag.After("d", "b"), dag.AllowFailed()))
		r := readyNodes(t, q)
		finishNode(t, q, r["a"], driver.OutcomeFailed, nil)
		wantStates(t, g, id, "after a failed", ns{"a": nFailed, "b": nCancelled, "c": nCancelled, "d": nPending, "e": nCancelled})
		r = readyNodes(t, q)
		wantReady(t, "after a failed", r, "d")
		finishNode(t, q, r["d"], driver.OutcomeDone, nil)
		info := wantStates(t, g, id, "at the end", ns{"d": nDone})
		if !info.Finished() || info.Succeeded() {
			t.Errorf("at the end the graph is %+v, want finished, not succeeded", info)
		}
		wantLen(t, q, "g", 0)
	})
	checkAs(s, t, "RetryRunsCancelledAgain", func(t *testing.T, q queue.Queue, g driver.Graphs) {
		id := dispatchGraph(t, q, diamond(t))
		r := readyNodes(t, q)
		finishNode(t, q, r["a"], driver.OutcomeDone, nil)
		r = readyNodes(t, q)
		finishNode(t, q, r["b"], driver.OutcomeFailed, nil)
		finishNode(t, q, r["c"], driver.OutcomeDone, nil)
		wantStates(t, g, id, "after b failed", ns{"a": nDone, "b": nFailed, "c": nDone, "d": nCancelled})
		n, err := g.RetryGraph(t.Context(), id)
		if err != nil || n != 1 {
			t.Fatalf("RetryGraph = %d, %v; want 1 node retried", n, err)
		}
		wantStates(t, g, id, "after the retry", ns{"a": nDone, "b": nPending, "c": nDone, "d": nWaiting})
		r = readyNodes(t, q)
		wantReady(t, "after the retry", r, "b")
		if r["b"].Attempts != 1 {
			t.Errorf("the retried node's attempts are %d, want 1 (reset)", r["b"].Attempts)
		}
		finishNode(t, q, r["b"], driver.OutcomeDone, nil)
		r = readyNodes(t, q)
		wantReady(t, "after b succeeded", r, "d")
		finishNode(t, q, r["d"], driver.OutcomeDone, nil)
		if info := wantStates(t, g, id, "at the end", ns{"d": nDone}); !info.Succeeded() {
			t.Errorf("at the end the graph is %+v, want succeeded", info)
		}
		if n, err := g.RetryGraph(t.Context(), id); err != nil || n != 0 {
			t.Errorf("RetryGraph of a graph that succeeded = %d, %v; want 0", n, err)
		}
		if _, err := g.RetryGraph(t.Context(), "no-such-graph"); !errors.Is(err, queue.ErrNotFound) {
			t.Errorf("RetryGraph of an unknown graph: %v, want ErrNotFound", err)
		}
	})
	checkAs(s, t, "CancelGraph", func(t *testing.T, q queue.Queue, g driver.Graphs) {
		id := dispatchGraph(t, q, diamond(t))
		r := readyNodes(t, q)
		finishNode(t, q, r["a"], driver.OutcomeDone, nil)
		r = readyNodes(t, q) // b and c run
		info, err := g.CancelGraph(t.Context(), id)
		if err != nil {
			t.Fatalf("CancelGraph: %v", err)
		}
		if info.CancelledAt.IsZero() || !info.Finished() {
			t.Errorf("after CancelGraph the graph is %+v, want cancelled and finished", info)
		}
		wantStates(t, g, id, "after CancelGraph", ns{"a": nDone, "b": nCancelled, "c": nCancelled, "d": nCancelled})
		err = completeOne(t.Context(), q, driver.Completion{Lease: r["b"].Lease(), Outcome: driver.OutcomeDone, Graph: id})
		if !errors.Is(err, queue.ErrLeaseLost) {
			t.Errorf("Complete of a node cancelled while running: %v, want ErrLeaseLost", err)
		}
		wantLen(t, q, "g", 0)
		if _, err := g.CancelGraph(t.Context(), "no-such-graph"); !errors.Is(err, queue.ErrNotFound) {
			t.Errorf("CancelGraph of an unknown graph: %v, want ErrNotFound", err)
		}
	})
	checkAs(s, t, "CancelledJobCancelsDependants", func(t *testing.T, q queue.Queue, g driver.Graphs) {
		id := dispatchGraph(t, q, diamond(t))
		r := readyNodes(t, q)
		finishNode(t, q, r["a"], driver.OutcomeDone, nil)
		r = readyNodes(t, q)
		finishNode(t, q, r["b"], driver.OutcomeCancelled, nil) // its handler's Cancel
		finishNode(t, q, r["c"], driver.OutcomeDone, nil)
		wantStates(t, g, id, "after b cancelled", ns{"a": nDone, "b": nCancelled, "c": nDone, "d": nCancelled})
		wantLen(t, q, "g", 0)
		c := controller(q)
		if c == nil {
			return
		}
		id = dispatchGraph(t, q, diamond(t))
		r = readyNodes(t, q)
		if _, err := c.Cancel(t.Context(), r["a"].ID); err != nil {
			t.Fatalf("Cancel of a running node: %v", err)
		}
		wantStates(t, g, id, "after Cancel of a", ns{"a": nCancelled, "b": nCancelled, "c": nCancelled, "d": nCancelled})
	})
	checkAs(s, t, "PurgeCancelsNode", func(t *testing.T, q queue.Queue, g driver.Graphs) {
		// A purge removes a waiting node's job as a cancel does: the node
		// and its waiting dependants are cancelled, and the graph
		// finishes. Another graph's running node is left alone.
		id := dispatchGraph(t, q, diamond(t))
		other := dispatchGraph(t, q, dag.New("running").Add("r", node(t, "r")))
		running := readyNodes(t, q)
		wantReady(t, "after dispatch", running, "a", "r")
		nack(t, q, running["a"], time.Now(), "later") // a waits in the queue again
		n, err := q.Purge(t.Context(), "g")
		if err != nil || n != 1 {
			t.Fatalf("Purge(g) = %d, %v; want 1 (node a's job), nil", n, err)
		}
		info := wantStates(t, g, id, "after Purge", ns{"a": nCancelled, "b": nCancelled, "c": nCancelled, "d": nCancelled})
		if !info.Finished() {
			t.Errorf("after Purge the graph is %+v, want finished", info)
		}
		wantStates(t, g, other, "the other graph after Purge", ns{"r": nPending})
		finishNode(t, q, running["r"], driver.OutcomeDone, nil)
		wantStates(t, g, other, "the other graph at the end", ns{"r": nDone})
		wantLen(t, q, "g", 0)
	})
	checkAs(s, t, "ConcurrentFanIn", func(t *testing.T, q queue.Queue, g driver.Graphs) {
		// b and c finish at the same instant through two handles (two
		// processes on a shared store): d is pushed once, never twice,
		// never not at all.
		hs := s.twoHandles(t, q)
		for range 10 {
			id := dispatchGraph(t, q, diamond(t))
			r := readyNodes(t, q)
			finishNode(t, q, r["a"], driver.OutcomeDone, nil)
			r = readyNodes(t, q)
			js := []queue.Job{r["b"], r["c"]}
			var wg sync.WaitGroup
			start := make(chan struct{})
			errs := make([]error, 2)
			for i, h := range hs {
				wg.Go(func() {
					<-start
					errs[i] = completeOne(context.WithoutCancel(t.Context()), h,
						driver.Completion{Lease: js[i].Lease(), Outcome: driver.OutcomeDone, Graph: id})
				})
			}
			close(start)
			wg.Wait()
			if err := errors.Join(errs...); err != nil {
				t.Fatalf("Complete of b and c at once: %v", err)
			}
			r = readyNodes(t, q)
			wantReady(t, "after b and c at once", r, "d")
			finishNode(t, q, r["d"], driver.OutcomeDone, nil)
		}
	})
	checkAs(s, t, "DependantReadsResult", func(t *testing.T, q queue.Queue, g driver.Graphs) {
		rs := driver.CapabilitiesOf(q).Results
		if rs == nil {
			t.Skip(lacks(q, "Results"))
		}
		id := dispatchGraph(t, q, diamond(t))
		r := readyNodes(t, q)
		finishNode(t, q, r["a"], driver.OutcomeDone, []byte(`{"n":42}`))
		d, err := g.GraphNode(t.Context(), id, "d")
		if err != nil || !slices.Equal(d.After, []string{"b", "c"}) {
			t.Fatalf("GraphNode(d) = %+v, %v; want After [b c]", d, err)
		}
		a, err := g.GraphNode(t.Context(), id, "a")
		if err != nil || a.JobID != r["a"].ID || a.State != nDone {
			t.Fatalf("GraphNode(a) = %+v, %v; want job %s, done", a, err, r["a"].ID)
		}
		b, err := rs.Result(t.Context(), a.JobID)
		if err != nil || string(b) != `{"n":42}` {
			t.Errorf("a's result %q, %v", b, err)
		}
		if _, err := g.GraphNode(t.Context(), id, "zz"); !errors.Is(err, queue.ErrNotFound) {
			t.Errorf("GraphNode of an unknown node: %v, want ErrNotFound", err)
		}
	})
	checkAs(s, t, "Refused", func(t *testing.T, q queue.Queue, g driver.Graphs) {
		bad := []struct {
			what string
			g    *dag.Graph
		}{
			{"no nodes", dag.New("x")},
			{"an unknown dependency", dag.New("x").Add("a", node(t, "a"), dag.After("zz"))},
			{"a dependency added later", dag.New("x").Add("a", node(t, "a"), dag.After("b")).Add("b", node(t, "b"))},
			{"a name used twice", dag.New("x").Add("a", node(t, "a")).Add("a", node(t, "b"))},
			{"an empty name", dag.New("x").Add("", node(t, "a"))},
		}
		for _, c := range bad {
			if _, err := dag.Dispatch(t.Context(), q, c.g); !errors.Is(err, driver.ErrGraph) {
				t.Errorf("a graph with %s: %v, want ErrGraph", c.what, err)
			}
		}
		// The store checks by the same rules when it is called directly.
		if err := g.PushGraph(t.Context(), driver.GraphRecord{ID: driver.NewID()}, nil); !errors.Is(err, driver.ErrGraph) {
			t.Errorf("PushGraph without nodes: %v, want ErrGraph", err)
		}
		wantLen(t, q, "", 0)
		if _, err := g.CancelGraph(t.Context(), "none"); !errors.Is(err, queue.ErrNotFound) {
			t.Errorf("CancelGraph of an unknown graph: %v, want ErrNotFound", err)
		}
		if _, _, err := g.GetGraph(t.Context(), "none"); !errors.Is(err, queue.ErrNotFound) {
			t.Errorf("GetGraph of an unknown graph: %v, want ErrNotFound", err)
		}
	})
	checkAs(s, t, "ListGraphs", func(t *testing.T, q queue.Queue, g driver.Graphs) {
		var ids []string
		for range 3 {
			ids = append(ids, dispatchGraph(t, q, diamond(t)))
		}
		p1, err := g.ListGraphs(t.Context(), driver.BatchFilter{Limit: 2})
		if err != nil || len(p1.Graphs) != 2 || p1.Graphs[0].ID != ids[2] || p1.Graphs[1].ID != ids[1] || p1.Next == "" {
			t.Fatalf("first page %+v, %v; want the two newest and a next", p1, err)
		}
		p2, err := g.ListGraphs(t.Context(), driver.BatchFilter{Limit: 2, After: p1.Next})
		if err != nil || len(p2.Graphs) != 1 || p2.Graphs[0].ID != ids[0] || p2.Next != "" {
			t.Fatalf("second page %+v, %v; want the oldest and no next", p2, err)
		}
	})
	if s.h.Tx != nil {
		checkAs(s, t, "AtomicInTx", func(t *testing.T, q queue.Queue, g driver.Graphs) {
			p, _, rollback := s.h.Tx(t, q)
			id := dispatchGraph(t, p, diamond(t))
			if err := rollback(); err != nil {
				t.Fatal(err)
			}
			wantLen(t, q, "g", 0)
			if _, _, err := g.GetGraph(t.Context(), id); !errors.Is(err, queue.ErrNotFound) {
				t.Errorf("GetGraph of a graph rolled back: %v, want ErrNotFound", err)
			}
			p, commit, _ := s.h.Tx(t, q)
			id = dispatchGraph(t, p, diamond(t))
			if err := commit(); err != nil {
				t.Fatal(err)
			}
			wantStates(t, g, id, "after commit", ns{"a": nPending, "b": nWaiting})
			wantLen(t, q, "g", 1)
		})
	}
}
