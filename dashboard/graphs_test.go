package dashboard_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/meridianjobs/meridian/dag"
	"github.com/meridianjobs/meridian/dashboard"
	"github.com/meridianjobs/meridian/internal/testutil"
	"github.com/meridianjobs/meridian/memqueue"
	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

type graphStep struct{ Name string }

// dispatchDiamond dispatches the graph a → (b, c) → d on queue "g".
func dispatchDiamond(t *testing.T, q queue.Queue, name string) string {
	t.Helper()
	job := func(n string) queue.Job {
		j, err := queue.NewJob(graphStep{n}, queue.OnQueue("g"))
		if err != nil {
			t.Fatal(err)
		}
		return j
	}
	g := dag.New(name).
		Add("a", job("a")).
		Add("b", job("b"), dag.After("a")).
		Add("c", job("c"), dag.After("a")).
		Add("d", job("d"), dag.After("b", "c"))
	id, err := dag.Dispatch(context.Background(), q, g)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// finishGraphNode reserves the one ready job of queue "g" and records
// outcome o for it.
func finishGraphNode(t *testing.T, q queue.Queue, o driver.Outcome) queue.Job {
	t.Helper()
	ctx := context.Background()
	jobs, err := q.Reserve(ctx, []string{"g"}, 1, time.Minute)
	if err != nil || len(jobs) != 1 {
		t.Fatalf("Reserve = %d, %v", len(jobs), err)
	}
	id, _ := dag.Of(&jobs[0])
	if err := testutil.Complete(ctx, q, driver.Completion{Lease: jobs[0].Lease(), Outcome: o, Reason: "boom", Graph: id}); err != nil {
		t.Fatal(err)
	}
	return jobs[0]
}

// nodeStates reads the drawing's nodes: name -> state.
func nodeStates(doc *html.Node) map[string]string {
	out := map[string]string{}
	for _, n := range findAll(doc, func(n *html.Node) bool { return n.Data == "g" && hasAttr(n, "data-node") }) {
		out[attr(n, "data-node")] = attr(n, "data-state")
	}
	return out
}

// TestGraphsPages walks the Graphs page and a graph's page over memqueue:
// the list newest first; the drawing with a box per node in its state and
// a line per dependency; retrying the failed node (its cancelled dependant
// waits again) and cancelling the graph through their forms.
func TestGraphsPages(t *testing.T) {
	t.Parallel()
	testGraphsPages(t, memqueue.New())
}

// testGraphsPages is TestGraphsPages over q (TestRedisGraphsPages: over
// redisqueue).
func testGraphsPages(t *testing.T, q queue.Queue) {
	old := dispatchDiamond(t, q, "report")
	finishGraphNode(t, q, driver.OutcomeDone)   // a
	finishGraphNode(t, q, driver.OutcomeFailed) // b or c: the other stays pending, d is cancelled
	newer := dispatchDiamond(t, q, "second")
	s := serve(t, dashboard.ForQueue(q))

	list := s.page("graphs")
	if got := rowsOf(list.Doc, "data-graph"); len(got) != 2 || got[0] != newer || got[1] != old {
		t.Fatalf("the graphs page lists %v, want [%s %s] (newest first)", got, newer, old)
	}
	if find(list.Doc, func(n *html.Node) bool {
		return n.Data == "a" && strings.HasSuffix(attr(n, "href"), "graphs") && strings.Contains(attr(n, "class"), "active")
	}) == nil {
		t.Errorf("the sidebar has no active Graphs entry:\n%s", list.Body)
	}

	page := s.page("graphs/" + old)
	if find(page.Doc, byID("graph-drawing")) == nil {
		t.Fatalf("the graph page has no drawing:\n%s", page.Body)
	}
	st := nodeStates(page.Doc)
	failed := ""
	for n, s := range st {
		if s == "failed" {
			failed = n
		}
	}
	if len(st) != 4 || st["a"] != "done" || (failed != "b" && failed != "c") || st["d"] != "cancelled" {
		t.Fatalf("the drawing's nodes are %v, want a done, b or c failed, the other pending, d cancelled", st)
	}
	if edges := findAll(page.Doc, func(n *html.Node) bool { return n.Data == "line" && strings.Contains(attr(n, "class"), "edge") }); len(edges) != 4 {
		t.Errorf("the drawing has %d dependency lines, want 4", len(edges))
	}
	if got := rowsOf(page.Doc, "data-node"); len(got) != 4 {
		t.Errorf("the nodes table lists %v, want 4 nodes", got)
	}

	// Retry the failed node: it is pending again and d waits for it.
	retry := formWithAction(page.Doc, "/retry")
	if retry == nil {
		t.Fatalf("a graph with a failed node offers no retry:\n%s", page.Body)
	}
	after := s.follow(s.submit(s.url("graphs/"+old), retry, nil, nil))
	if st := nodeStates(after.Doc); st[failed] != "pending" || st["d"] != "waiting" {
		t.Errorf("after retry the nodes are %v, want %s pending and d waiting", st, failed)
	}

	// Cancel the graph: every node not finished is cancelled.
	cancel := formWithAction(after.Doc, "/cancel")
	if cancel == nil {
		t.Fatalf("a running graph offers no cancel:\n%s", after.Body)
	}
	done := s.follow(s.submit(s.url("graphs/"+old), cancel, nil, nil))
	if st := text(find(done.Doc, byID("graph-status"))); st != "cancelled" {
		t.Errorf("after cancel the graph shows status %q", st)
	}
	if st := nodeStates(done.Doc); st["b"] != "cancelled" || st["c"] != "cancelled" || st["d"] != "cancelled" {
		t.Errorf("after cancel the nodes are %v, want b, c and d cancelled", st)
	}
	if formWithAction(done.Doc, "/cancel") != nil {
		t.Errorf("a cancelled graph still offers cancel")
	}
	if r := s.get(s.url("graphs/nope")); r.StatusCode != http.StatusNotFound {
		t.Errorf("an unknown graph: %d, want 404", r.StatusCode)
	}
}
