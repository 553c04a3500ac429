package contracttest

import (
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/meridianjobs/meridian/dag"
	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// Timing of the workflow-end checks: a result's retention, short so that
// it passes within the check, and how long the maintenance handle keeps
// finished graphs.
const (
	resultKeep = time.Second
	graphKeep  = 2 * time.Second
)

// maintain runs one maintenance pass of q's store when the harness can.
func (s *suite) maintain(t *testing.T, q queue.Queue) {
	t.Helper()
	if s.h.Maintain != nil {
		s.h.Maintain(t, q, graphKeep)
	}
}

// hasResult reports whether the store has a result for job id.
func hasResult(t *testing.T, r driver.Results, id string) bool {
	t.Helper()
	_, err := r.Result(t.Context(), id)
	if err != nil && !errors.Is(err, queue.ErrNotFound) {
		t.Fatalf("Result(%s): %v", id, err)
	}
	return err == nil
}

// pastResultTime waits until a result stored with until has passed it,
// by the store's clock as well as the suite's.
func (s *suite) pastResultTime(t *testing.T, until time.Time) {
	t.Helper()
	eventually(t, "the result's retention passing", func() bool { return time.Now().After(until.Add(s.tol)) })
}

// testWorkflowEnds checks what a workflow's end starts: a node's (or a
// batch member's) result is kept while its graph (batch) runs, however
// long past its retention, and for its retention once the graph (batch)
// has finished; a finished graph is pruned after the store's retention,
// a running one never.
func (s *suite) testWorkflowEnds(t *testing.T) {
	checkAs(s, t, "NodeResultKeptWhileGraphRuns", func(t *testing.T, q queue.Queue, g driver.Graphs) {
		rs := driver.CapabilitiesOf(q).Results
		if rs == nil {
			t.Skip(lacks(q, "Results"))
		}
		id := dispatchGraph(t, q, dag.New("ends").
			Add("a", node(t, "a")).
			Add("b", node(t, "b"), dag.After("a")))
		r := readyNodes(t, q)
		a := r["a"].ID
		until := time.Now().Add(resultKeep)
		c := driver.Completion{Lease: r["a"].Lease(), Outcome: driver.OutcomeDone, Graph: id, Result: []byte(`"a"`), ResultUntil: until}
		if err := completeOne(t.Context(), q, c); err != nil {
			t.Fatalf("Complete of node a: %v", err)
		}
		// The retention the store took from the ack: at least this.
		keep := time.Until(until)
		s.pastResultTime(t, until)
		s.maintain(t, q)
		if !hasResult(t, rs, a) {
			t.Fatalf("node a's result is gone past its retention while its dependant b waits to run; want it kept until the graph finishes")
		}
		r = readyNodes(t, q)
		wantReady(t, "after a", r, "b")
		finished := time.Now()
		finishNode(t, q, r["b"], driver.OutcomeDone, nil)
		s.maintain(t, q)
		kept := hasResult(t, rs, a)
		if !kept && time.Now().Before(finished.Add(keep-s.tol)) {
			t.Errorf("node a's result is gone as soon as its graph finished; want it kept for its retention after")
		}
		eventually(t, "node a's result pruned a retention after its graph finished", func() bool {
			s.maintain(t, q)
			return !hasResult(t, rs, a)
		})
		if time.Now().Before(finished.Add(keep - s.tol)) {
			t.Errorf("node a's result was pruned less than its retention after its graph finished")
		}
	})
	checkAs(s, t, "MemberResultKeptWhileBatchRuns", func(t *testing.T, q queue.Queue, rs driver.Results) {
		if workflows(q) == nil {
			t.Skip(lacks(q, "Workflows"))
		}
		if _, err := queue.DispatchBatch(t.Context(), q, newBatch(t, 2, false)); err != nil {
			t.Fatalf("DispatchBatch: %v", err)
		}
		var ms []queue.Job
		for _, j := range reserveMembers(t, q, 2) {
			ms = append(ms, j)
		}
		until := time.Now().Add(resultKeep)
		done := func(j queue.Job) {
			t.Helper()
			c := driver.Completion{Lease: j.Lease(), Outcome: driver.OutcomeDone, Batch: queue.BatchOf(&j),
				Result: []byte(strconv.Quote(j.ID)), ResultUntil: until}
			if err := completeOne(t.Context(), q, c); err != nil {
				t.Fatalf("Complete of member %s: %v", j.ID, err)
			}
		}
		done(ms[0])
		keep := time.Until(until) // the retention the store took from the ack: at least this
		s.pastResultTime(t, until)
		s.maintain(t, q)
		if !hasResult(t, rs, ms[0].ID) {
			t.Fatalf("member %s's result is gone past its retention while its batch runs; want it kept until the batch finishes", ms[0].ID)
		}
		finished := time.Now()
		done(ms[1])
		eventually(t, "the first member's result pruned a retention after its batch finished", func() bool {
			s.maintain(t, q)
			return !hasResult(t, rs, ms[0].ID)
		})
		if time.Now().Before(finished.Add(keep - s.tol)) {
			t.Errorf("member %s's result was pruned less than its retention after its batch finished", ms[0].ID)
		}
	})
	checkAs(s, t, "FinishedGraphPruned", func(t *testing.T, q queue.Queue, g driver.Graphs) {
		if s.h.Maintain == nil {
			t.Skip("Harness.Maintain is nil: the store keeps graphs by its own rule (memqueue: the newest 1000 finished)")
		}
		running := dispatchGraph(t, q, dag.New("running").
			Add("a", node(t, "a")).
			Add("b", node(t, "b"), dag.After("a")))
		ended := dispatchGraph(t, q, dag.New("ended").Add("x", node(t, "x")))
		r := readyNodes(t, q)
		wantReady(t, "after dispatch", r, "a", "x")
		finished := time.Now()
		finishNode(t, q, r["x"], driver.OutcomeDone, nil)
		s.maintain(t, q)
		_, _, err := g.GetGraph(t.Context(), ended)
		if err != nil && time.Now().Before(finished.Add(graphKeep-s.tol)) {
			t.Fatalf("a graph finished less than the retention ago: GetGraph = %v, want it kept", err)
		}
		eventually(t, "the finished graph pruned after the retention", func() bool {
			s.maintain(t, q)
			_, _, err := g.GetGraph(t.Context(), ended)
			if err != nil && !errors.Is(err, queue.ErrNotFound) {
				t.Fatalf("GetGraph of the finished graph: %v", err)
			}
			return err != nil
		})
		if _, err := g.GraphNode(t.Context(), ended, "x"); !errors.Is(err, queue.ErrNotFound) {
			t.Errorf("a node of a pruned graph: %v, want ErrNotFound", err)
		}
		// The running graph is kept however old, and still runs.
		wantStates(t, g, running, "after the prune", ns{"a": nPending, "b": nWaiting})
		finishNode(t, q, r["a"], driver.OutcomeDone, nil)
		wantReady(t, "after a", readyNodes(t, q), "b")
	})
}
