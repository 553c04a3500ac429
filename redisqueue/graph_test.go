package redisqueue_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/meridianjobs/meridian/dag"
	"github.com/meridianjobs/meridian/internal/testutil"
	"github.com/meridianjobs/meridian/memqueue"
	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
	"github.com/meridianjobs/meridian/redisqueue"
)

// gnode is the node job of the graph tests, on queue "gq".
type gnode struct{ N string }

// chainGraph is a → b → c on queue "gq".
func chainGraph(t *testing.T) *dag.Graph {
	t.Helper()
	g := dag.New("chain")
	prev := ""
	for _, n := range []string{"a", "b", "c"} {
		j, err := queue.NewJob(gnode{n}, queue.OnQueue("gq"))
		if err != nil {
			t.Fatal(err)
		}
		if prev == "" {
			g.Add(n, j)
		} else {
			g.Add(n, j, dag.After(prev))
		}
		prev = n
	}
	return g
}

// nodesReady reserves every job of "gq" and returns them by node name,
// failing unless they are exactly names, each once.
func nodesReady(t *testing.T, q queue.Queue, what string, names ...string) map[string]queue.Job {
	t.Helper()
	jobs := reserveAll(t, q, "gq", len(names))
	out := map[string]queue.Job{}
	for _, j := range jobs {
		_, n := dag.Of(&j)
		out[n] = j
	}
	for _, n := range names {
		if _, ok := out[n]; !ok {
			t.Fatalf("%s: node %s not ready (ready: %v)", what, n, out)
		}
	}
	return out
}

// nodeStates checks graph id's nodes' states in order a, b, c.
func nodeStates(t *testing.T, q *redisqueue.Queue, id, what string, want ...driver.NodeState) {
	t.Helper()
	_, nodes, err := q.GetGraph(t.Context(), id)
	if err != nil {
		t.Fatalf("%s: GetGraph: %v", what, err)
	}
	for i, n := range nodes {
		if i < len(want) && n.State != want[i] {
			t.Errorf("%s: node %s is %s, want %s", what, n.Name, n.State, want[i])
		}
	}
}

// onlyGraph returns the ID of the one graph q lists.
func onlyGraph(t *testing.T, q *redisqueue.Queue) string {
	t.Helper()
	page, err := q.ListGraphs(t.Context(), driver.BatchFilter{})
	if err != nil || len(page.Graphs) != 1 {
		t.Fatalf("ListGraphs = %+v, %v; want one graph", page, err)
	}
	return page.Graphs[0].ID
}

// TestGraphStepsResume kills the graph protocol (scripts_graph.go)
// between each two of its steps and checks that another process
// finishes the steps, each dependant pushed once.
func TestGraphStepsResume(t *testing.T) {
	t.Parallel()
	const (
		w = driver.NodeWaiting
		p = driver.NodePending
		d = driver.NodeDone
		f = driver.NodeFailed
		c = driver.NodeCancelled
	)
	done := func(t *testing.T, q queue.Queue, j queue.Job, o driver.Outcome) {
		t.Helper()
		id, _ := dag.Of(&j)
		if err := testutil.Complete(t.Context(), q, driver.Completion{Lease: j.Lease(), Outcome: o, Graph: id, Reason: "boom"}); err != nil {
			t.Fatalf("Complete of node %s: %v (the outcome is recorded: the graph's steps are left to others)", j.ID, err)
		}
	}
	t.Run("BetweenOutcomeAndGraph", func(t *testing.T) {
		t.Parallel()
		killed, peer := protoSetup(t, "member-noted")
		id, err := dag.Dispatch(t.Context(), killed, chainGraph(t))
		if err != nil {
			t.Fatal(err)
		}
		done(t, killed, nodesReady(t, killed, "after dispatch", "a")["a"], driver.OutcomeDone)
		nodeStates(t, peer, id, "in between", p, w, w)
		if n := outbox(t, peer, "gq"); n != 1 {
			t.Errorf("the outbox holds %d events in between, want 1", n)
		}
		r := nodesReady(t, peer, "after the sweep", "b")
		nodeStates(t, peer, id, "after the sweep", d, p, w)
		reserveAll(t, peer, "gq", 0) // a second sweep pushes nothing
		done(t, peer, r["b"], driver.OutcomeDone)
		done(t, peer, nodesReady(t, peer, "after b", "c")["c"], driver.OutcomeDone)
		nodeStates(t, peer, id, "at the end", d, d, d)
		if n := outbox(t, peer, "gq"); n != 0 {
			t.Errorf("the outbox holds %d events at the end, want 0", n)
		}
	})
	t.Run("BetweenLiveAndRoots", func(t *testing.T) {
		t.Parallel()
		killed, peer := protoSetup(t, "graph-live")
		if _, err := dag.Dispatch(t.Context(), killed, chainGraph(t)); !errors.Is(err, errKilled) {
			t.Fatalf("dag.Dispatch = %v, want the kill", err)
		}
		id := onlyGraph(t, peer)
		nodeStates(t, peer, id, "in between", p, w, w)
		if n, _ := peer.Len(t.Context(), "gq"); n != 0 {
			t.Errorf("Len(gq) = %d in between, want 0 (the root not pushed yet)", n)
		}
		nodesReady(t, peer, "after the sweep", "a")
		reserveAll(t, peer, "gq", 0)
		if n := outbox(t, peer, "gq"); n != 0 {
			t.Errorf("the outbox holds %d events after the sweep, want 0", n)
		}
	})
	t.Run("BeforeLive", func(t *testing.T) {
		t.Parallel()
		killed, peer := protoSetup(t, "graph-noted")
		if _, err := dag.Dispatch(t.Context(), killed, chainGraph(t)); !errors.Is(err, errKilled) {
			t.Fatalf("dag.Dispatch = %v, want the kill", err)
		}
		// The graph never went live: nobody lists it, nothing is pushed,
		// and its event waits in the outbox until the graph expires.
		if page, err := peer.ListGraphs(t.Context(), driver.BatchFilter{}); err != nil || len(page.Graphs) != 0 {
			t.Errorf("ListGraphs = %+v, %v; want none", page, err)
		}
		reserveAll(t, peer, "gq", 0)
	})
	t.Run("BetweenPushAndList", func(t *testing.T) {
		t.Parallel()
		killed, peer := protoSetup(t, "node-pushed")
		id, err := dag.Dispatch(t.Context(), killed, chainGraph(t))
		if err != nil {
			t.Fatalf("dag.Dispatch: %v (the roots are pushed: the rest is left to others)", err)
		}
		// The root's job is stored and runs; its entry stays on the push
		// list and the follow event in the outbox.
		r := nodesReady(t, peer, "after dispatch", "a")
		done(t, peer, r["a"], driver.OutcomeDone)
		nodesReady(t, peer, "after a", "b") // a is not pushed again
		nodeStates(t, peer, id, "after a", d, p, w)
		if n := outbox(t, peer, "gq"); n != 0 {
			t.Errorf("the outbox holds %d events after the sweep, want 0", n)
		}
	})
	t.Run("BetweenCancelMarkAndNodes", func(t *testing.T) {
		t.Parallel()
		killed, peer := protoSetup(t, "graph-cancel-marked")
		id, err := dag.Dispatch(t.Context(), killed, chainGraph(t))
		if err != nil {
			t.Fatal(err)
		}
		a := nodesReady(t, peer, "after dispatch", "a")["a"]
		if _, err := killed.CancelGraph(t.Context(), id); !errors.Is(err, errKilled) {
			t.Fatalf("CancelGraph = %v, want the kill", err)
		}
		nodeStates(t, peer, id, "in between", p, c, c)
		reserveAll(t, peer, "gq", 0) // the sweep cancels a
		nodeStates(t, peer, id, "after the sweep", c, c, c)
		if n := outbox(t, peer, "gq"); n != 0 {
			t.Errorf("the outbox holds %d events after the sweep, want 0", n)
		}
		info, err := peer.CancelGraph(t.Context(), id) // a finished graph: nothing changes
		if err != nil || !info.Finished() || info.CancelledAt.IsZero() {
			t.Fatalf("CancelGraph again = %+v, %v; want finished and cancelled", info, err)
		}
		err = testutil.Complete(t.Context(), peer, driver.Completion{Lease: a.Lease(), Outcome: driver.OutcomeDone, Graph: id})
		if !errors.Is(err, queue.ErrLeaseLost) {
			t.Errorf("Complete of the cancelled node: %v, want ErrLeaseLost", err)
		}
	})
	t.Run("BetweenRetryAndPush", func(t *testing.T) {
		t.Parallel()
		killed, peer := protoSetup(t, "graph-retried")
		id, err := dag.Dispatch(t.Context(), killed, chainGraph(t))
		if err != nil {
			t.Fatal(err)
		}
		done(t, killed, nodesReady(t, killed, "after dispatch", "a")["a"], driver.OutcomeDone)
		done(t, killed, nodesReady(t, killed, "after a", "b")["b"], driver.OutcomeFailed)
		nodeStates(t, peer, id, "after b failed", d, f, c)
		if _, err := killed.RetryGraph(t.Context(), id); !errors.Is(err, errKilled) {
			t.Fatalf("RetryGraph = %v, want the kill", err)
		}
		nodeStates(t, peer, id, "in between", d, p, w)
		r := nodesReady(t, peer, "after the sweep", "b") // the dead letter, back to ready once
		reserveAll(t, peer, "gq", 0)
		done(t, peer, r["b"], driver.OutcomeDone)
		done(t, peer, nodesReady(t, peer, "after b", "c")["c"], driver.OutcomeDone)
		nodeStates(t, peer, id, "at the end", d, d, d)
	})
}

// wfNode is a graph node job of testdata/batchworker (same type name).
type wfNode struct{ N int }

// layered returns a graph of layers × width wfNode jobs on queue "gn":
// each node after the first layer depends on fanIn nodes of the layer
// before (chosen with a fixed seed). It returns the graph and each node's
// dependencies by node number.
func layered(t *testing.T, layers, width, fanIn int) (*dag.Graph, [][]int) {
	t.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	g := dag.New(fmt.Sprintf("layered %dx%d", layers, width))
	deps := make([][]int, layers*width)
	for l := range layers {
		for i := range width {
			n := l*width + i
			j, err := queue.NewJob(wfNode{n}, queue.OnQueue("gn"))
			if err != nil {
				t.Fatal(err)
			}
			var after []string
			if l > 0 {
				for _, k := range rng.Perm(width)[:fanIn] {
					deps[n] = append(deps[n], (l-1)*width+k)
					after = append(after, strconv.Itoa((l-1)*width+k))
				}
			}
			g.Add(strconv.Itoa(n), j, dag.After(after...))
		}
	}
	return g, deps
}

// workers starts testdata/batchworker processes on prefix p and stops
// those still running when the test ends.
type workers struct {
	t   *testing.T
	bin string
	env []string
	mu  sync.Mutex
	all []*exec.Cmd
}

func newWorkers(t *testing.T, p string) *workers {
	w := &workers{t: t, bin: buildBatchWorker(t),
		env: append(os.Environ(), "BATCHWORKER_ADDR="+testutil.DSN(t, testutil.RedisEnv), "BATCHWORKER_PREFIX="+p)}
	t.Cleanup(func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		for _, c := range w.all {
			if c.ProcessState == nil {
				c.Process.Signal(syscall.SIGTERM)
				c.Wait()
			}
		}
	})
	return w
}

func (w *workers) start() *exec.Cmd {
	c := exec.Command(w.bin)
	c.Env = w.env
	c.Stderr = os.Stderr
	if err := c.Start(); err != nil {
		w.t.Fatal(err)
	}
	w.mu.Lock()
	w.all = append(w.all, c)
	w.mu.Unlock()
	return c
}

// waitGraphDone waits until graph id has finished and queue "gn" and its
// outbox are empty, and fails unless every node is done.
func waitGraphDone(t *testing.T, q *redisqueue.Queue, id string, nodes int, within time.Duration) {
	t.Helper()
	testutil.Eventually(t, within, func() bool {
		info, _, err := q.GetGraph(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if !info.Finished() {
			return false
		}
		l, err := q.Len(t.Context(), "")
		return err == nil && l == 0 && outbox(t, q, "gn") == 0
	}, "the graph to finish and the queue to drain")
	info, _, err := q.GetGraph(t.Context(), id)
	if err != nil || info.Done != nodes || info.Total != nodes {
		t.Fatalf("the graph ended as %+v, %v; want all %d nodes done", info, err, nodes)
	}
}

// checkGraphRuns judges the runs batchworker logged of a graph's nodes:
// every node ran; none started before one of its dependencies had
// finished a run; none ran more than once from a fresh push (a run again
// after a lost lease is recovered), so none was pushed twice. It returns
// the runs beyond the first.
func checkGraphRuns(t *testing.T, rdb redis.UniversalClient, p string, deps [][]int) (extra int) {
	t.Helper()
	runs, err := rdb.LRange(t.Context(), "{"+p+"}:test:graph", 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	type run struct {
		recovered  bool
		start, end int64
	}
	got := map[int][]run{}
	for _, r := range runs {
		var n, rc int
		var s, e int64
		if _, err := fmt.Sscanf(r, "%d:%d:%d:%d", &n, &rc, &s, &e); err != nil {
			t.Fatalf("log entry %q: %v", r, err)
		}
		got[n] = append(got[n], run{rc == 1, s, e})
	}
	firstEnd := make([]int64, len(deps))
	firstStart := make([]int64, len(deps))
	for n := range deps {
		rs := got[n]
		if len(rs) == 0 {
			t.Fatalf("node %d never ran", n)
		}
		extra += len(rs) - 1
		fresh := 0
		firstEnd[n], firstStart[n] = rs[0].end, rs[0].start
		for _, r := range rs {
			firstEnd[n], firstStart[n] = min(firstEnd[n], r.end), min(firstStart[n], r.start)
			if !r.recovered {
				fresh++
			}
		}
		if fresh > 1 {
			t.Errorf("node %d ran %d times from a fresh push: it was pushed more than once", n, fresh)
		}
	}
	for n, ds := range deps {
		for _, d := range ds {
			if firstStart[n] < firstEnd[d] {
				t.Errorf("node %d started before its dependency %d had finished a run", n, d)
			}
		}
	}
	return extra
}

// TestGraphSIGKILL runs a graph of 600 nodes (30 layers of 20, each node
// after 3 of the layer before) on three worker processes while the test
// SIGKILLs one of them, at a random moment, every 100 to 300 ms until the
// graph has finished, starting another in its place: kills land between
// the steps of the graph protocol as they come. Every node must run, none
// before one of its dependencies finished a run, none pushed twice, and
// the graph end with every node done.
func TestGraphSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("starts worker processes; skipped with -short")
	}
	t.Parallel()
	rdb := client(t)
	p := prefix(t, rdb)
	q := newQueue(t, rdb, p)
	g, deps := layered(t, 30, 20, 3)
	id, err := dag.Dispatch(t.Context(), q, g)
	if err != nil {
		t.Fatal(err)
	}
	finished := func() bool {
		info, _, err := q.GetGraph(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		return info.Finished()
	}
	ws := newWorkers(t, p)
	live := []*exec.Cmd{ws.start(), ws.start(), ws.start()}
	kills := 0
	for end := time.Now().Add(2 * time.Minute); time.Now().Before(end); {
		time.Sleep(time.Duration(100+rand.IntN(200)) * time.Millisecond)
		if finished() {
			break
		}
		i := rand.IntN(len(live))
		live[i].Process.Kill()
		live[i].Wait()
		kills++
		live[i] = ws.start()
	}
	if kills == 0 {
		t.Fatal("the graph finished before the first kill: nothing was tested")
	}
	waitGraphDone(t, q, id, len(deps), 2*time.Minute)
	extra := checkGraphRuns(t, rdb, p, deps)
	t.Logf("%d nodes done once each in the graph over %d SIGKILLs; %d handler runs again after a kill", len(deps), kills, extra)
}

// TestGraph10kAcrossProcesses runs a graph of 10,000 nodes (100 layers of
// 100, each node after 3 of the layer before: 29,700 dependencies) over
// three worker processes: every node done, each after its dependencies
// and pushed once. By default it runs 1,000 nodes (10 layers);
// MERIDIAN_GRAPH_10K=1 runs the 10,000.
func TestGraph10kAcrossProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts worker processes; skipped with -short")
	}
	t.Parallel()
	rdb := client(t)
	p := prefix(t, rdb)
	q := newQueue(t, rdb, p)
	layers := 10
	if os.Getenv("MERIDIAN_GRAPH_10K") == "1" {
		layers = 100
	}
	g, deps := layered(t, layers, 100, 3)
	start := time.Now()
	id, err := dag.Dispatch(t.Context(), q, g)
	if err != nil {
		t.Fatal(err)
	}
	dispatched := time.Since(start)
	ws := newWorkers(t, p)
	for range 3 {
		ws.start()
	}
	waitGraphDone(t, q, id, len(deps), 10*time.Minute)
	took := time.Since(start)
	if extra := checkGraphRuns(t, rdb, p, deps); extra != 0 {
		t.Errorf("%d duplicate runs without any crash", extra)
	}
	t.Logf("%d nodes done in %s (dispatch %s)", len(deps), took.Round(time.Millisecond), dispatched.Round(time.Millisecond))
}

// TestGraphWide dispatches graphs wider than a script's chunk (500
// nodes): a root and 1,200 dependants, written in three scripts. When the
// root succeeds every dependant is pushed once; when it fails the
// cascade of cancels runs over several scripts and the graph finishes.
func TestGraphWide(t *testing.T) {
	t.Parallel()
	const n = 1200
	wide := func(t *testing.T) *dag.Graph {
		g := dag.New("wide")
		j, err := queue.NewJob(gnode{"root"}, queue.OnQueue("gq"))
		if err != nil {
			t.Fatal(err)
		}
		g.Add("root", j)
		for i := range n {
			j, err := queue.NewJob(gnode{strconv.Itoa(i)}, queue.OnQueue("gq"))
			if err != nil {
				t.Fatal(err)
			}
			g.Add(strconv.Itoa(i), j, dag.After("root"))
		}
		return g
	}
	for _, o := range []driver.Outcome{driver.OutcomeDone, driver.OutcomeFailed} {
		t.Run(o.String(), func(t *testing.T) {
			t.Parallel()
			rdb := client(t)
			q := newQueue(t, rdb, prefix(t, rdb))
			id, err := dag.Dispatch(t.Context(), q, wide(t))
			if err != nil {
				t.Fatal(err)
			}
			info, nodes, err := q.GetGraph(t.Context(), id)
			if err != nil || info.Total != n+1 || info.Pending != 1 || info.Waiting != n || len(nodes) != n+1 || nodes[n].Name != strconv.Itoa(n-1) {
				t.Fatalf("after dispatch GetGraph = %+v (%d nodes), %v", info, len(nodes), err)
			}
			root := reserveAll(t, q, "gq", 1)[0]
			if err := testutil.Complete(t.Context(), q, driver.Completion{Lease: root.Lease(), Outcome: o, Graph: id, Reason: "boom"}); err != nil {
				t.Fatal(err)
			}
			info, _, err = q.GetGraph(t.Context(), id)
			if err != nil {
				t.Fatal(err)
			}
			if o == driver.OutcomeFailed {
				if !info.Finished() || info.Cancelled != n || info.Failed != 1 {
					t.Fatalf("after the root failed the graph is %+v, want %d cancelled and finished", info, n)
				}
				reserveAll(t, q, "gq", 0)
				return
			}
			if info.Pending != n || info.Done != 1 {
				t.Fatalf("after the root the graph is %+v, want %d pending", info, n)
			}
			if l, err := q.Len(t.Context(), "gq"); err != nil || l != n {
				t.Fatalf("Len(gq) = %d, %v; want %d (each dependant pushed once)", l, err, n)
			}
		})
	}
}

// TestGraphDependantWakes checks that a dependant's push wakes a Wait on
// its queue, as any push does: a Worker idle on the queue runs it at
// once, not at its next poll.
func TestGraphDependantWakes(t *testing.T) {
	t.Parallel()
	rdb := client(t)
	p := prefix(t, rdb)
	q := newQueue(t, rdb, p)
	waiter := newQueue(t, client(t), p)
	id, err := dag.Dispatch(t.Context(), q, chainGraph(t))
	if err != nil {
		t.Fatal(err)
	}
	a := nodesReady(t, q, "after dispatch", "a")["a"]
	done := make(chan error, 1)
	go func() { done <- waiter.Wait(t.Context(), []string{"gq"}, time.Hour) }()
	testutil.Eventually(t, 10*time.Second, func() bool {
		n, err := rdb.PubSubNumSub(t.Context(), "{"+p+"}:wake").Result()
		return err == nil && n["{"+p+"}:wake"] == 1
	}, "the Wait did not subscribe")
	if err := testutil.Complete(t.Context(), q, driver.Completion{Lease: a.Lease(), Outcome: driver.OutcomeDone, Graph: id}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Wait: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Wait still blocked 10s after the dependant's push")
	}
	nodesReady(t, q, "after a", "b")
}

// TestGraphMatchesMemqueue runs random graphs through random outcomes,
// cancels of running nodes, retries and cancels of the graph on
// redisqueue and memqueue side by side, and checks
// after each step that the two agree on every node's state, on the
// counters and on which nodes are ready: the Lua scripts apply the
// rules of driver.Graphs as memqueue's Go does.
func TestGraphMatchesMemqueue(t *testing.T) {
	t.Parallel()
	t.Run("Standalone", func(t *testing.T) {
		t.Parallel()
		rdb := client(t)
		graphMatchesMemqueue(t, func(t *testing.T) *redisqueue.Queue { return newQueue(t, rdb, prefix(t, rdb)) })
	})
	t.Run("Cluster", func(t *testing.T) {
		t.Parallel()
		rdb := clusterClient(t)
		graphMatchesMemqueue(t, func(t *testing.T) *redisqueue.Queue { return newQueue(t, rdb, clusterPrefix(t, rdb)) })
	})
}

func graphMatchesMemqueue(t *testing.T, newRedis func(t *testing.T) *redisqueue.Queue) {
	gqs := []string{"gq0", "gq1", "gq2"} // the nodes' queues: several slots on a Cluster
	for seed := range uint64(8) {
		t.Run(strconv.FormatUint(seed, 10), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			red := newRedis(t)
			mem := memqueue.New()
			qs := []queue.Queue{red, mem}
			gs := []driver.Graphs{red, mem}
			build := func() *dag.Graph {
				r := rand.New(rand.NewPCG(seed, 11))
				g := dag.New("random")
				for i := range 25 {
					j, err := queue.NewJob(gnode{strconv.Itoa(i)}, queue.OnQueue(gqs[i%len(gqs)]))
					if err != nil {
						t.Fatal(err)
					}
					var after []string
					for k := range i {
						if r.IntN(6) == 0 {
							after = append(after, strconv.Itoa(k))
						}
					}
					opts := []dag.Option{dag.After(after...)}
					if r.IntN(4) == 0 {
						opts = append(opts, dag.AllowFailed())
					}
					g.Add(strconv.Itoa(i), j, opts...)
				}
				return g
			}
			ids := make([]string, 2)
			for i, q := range qs {
				id, err := dag.Dispatch(t.Context(), q, build())
				if err != nil {
					t.Fatal(err)
				}
				ids[i] = id
			}
			for step := range 40 {
				var infos [2]driver.GraphInfo
				var nodes [2][]driver.GraphNodeInfo
				for i, g := range gs {
					var err error
					if infos[i], nodes[i], err = g.GetGraph(t.Context(), ids[i]); err != nil {
						t.Fatal(err)
					}
				}
				for k := range nodes[0] {
					if nodes[0][k].Name != nodes[1][k].Name || nodes[0][k].State != nodes[1][k].State {
						t.Fatalf("step %d: node %s is %s on Redis, %s on memory", step, nodes[0][k].Name, nodes[0][k].State, nodes[1][k].State)
					}
				}
				a, b := infos[0], infos[1]
				if [6]int{a.Total, a.Waiting, a.Pending, a.Done, a.Failed, a.Cancelled} != [6]int{b.Total, b.Waiting, b.Pending, b.Done, b.Failed, b.Cancelled} ||
					a.CancelledAt.IsZero() != b.CancelledAt.IsZero() {
					t.Fatalf("step %d: Redis has %+v, memory %+v", step, a, b)
				}
				switch r := rng.IntN(10); {
				case r == 0:
					for i, g := range gs {
						if _, err := g.CancelGraph(t.Context(), ids[i]); err != nil {
							t.Fatal(err)
						}
					}
					continue
				case r <= 2:
					var ns [2]int
					for i, g := range gs {
						var err error
						if ns[i], err = g.RetryGraph(t.Context(), ids[i]); err != nil {
							t.Fatal(err)
						}
					}
					if ns[0] != ns[1] {
						t.Fatalf("step %d: RetryGraph retried %d on Redis, %d on memory", step, ns[0], ns[1])
					}
					continue
				}
				var ready [2]map[string]queue.Job
				for i, q := range qs {
					ready[i] = map[string]queue.Job{}
					jobs, err := q.Reserve(t.Context(), gqs, 100, time.Minute)
					if err != nil {
						t.Fatal(err)
					}
					for _, j := range jobs {
						_, n := dag.Of(&j)
						ready[i][n] = j
					}
				}
				var names []string
				for n := range ready[0] {
					if _, ok := ready[1][n]; !ok {
						t.Fatalf("step %d: node %s ready on Redis, not on memory", step, n)
					}
					names = append(names, n)
				}
				if len(ready[0]) != len(ready[1]) {
					t.Fatalf("step %d: %d nodes ready on Redis, %d on memory", step, len(ready[0]), len(ready[1]))
				}
				slices.Sort(names)
				for _, n := range names {
					if rng.IntN(8) == 0 { // cancelled while running, by Controller.Cancel
						for i, q := range qs {
							if _, err := q.(driver.Controller).Cancel(t.Context(), ready[i][n].ID); err != nil {
								t.Fatal(err)
							}
						}
						continue
					}
					o := []driver.Outcome{driver.OutcomeDone, driver.OutcomeDone, driver.OutcomeFailed, driver.OutcomeCancelled}[rng.IntN(4)]
					for i, q := range qs {
						j := ready[i][n]
						if err := testutil.Complete(t.Context(), q, driver.Completion{Lease: j.Lease(), Outcome: o, Graph: ids[i], Reason: "boom"}); err != nil {
							t.Fatal(err)
						}
					}
				}
			}
		})
	}
}

// TestFinishedGraphExpires checks that a finished graph's keys expire
// after the graph retention (shortened here to a second): GetGraph and
// GraphNode then answer ErrNotFound and ListGraphs drops the graph, while
// a running graph is kept and still runs.
func TestFinishedGraphExpires(t *testing.T) {
	t.Parallel()
	rdb := client(t)
	p := prefix(t, rdb)
	q := newQueue(t, rdb, p)
	redisqueue.SetGraphRetention(q, time.Second)
	running, err := dag.Dispatch(t.Context(), q, chainGraph(t))
	if err != nil {
		t.Fatal(err)
	}
	j, err := queue.NewJob(gnode{"x"}, queue.OnQueue("gx"))
	if err != nil {
		t.Fatal(err)
	}
	ended, err := dag.Dispatch(t.Context(), q, dag.New("ended").Add("x", j))
	if err != nil {
		t.Fatal(err)
	}
	x := reserveAll(t, q, "gx", 1)[0]
	if err := testutil.Complete(t.Context(), q, driver.Completion{Lease: x.Lease(), Outcome: driver.OutcomeDone, Graph: ended}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 30*time.Second, func() bool {
		_, _, err := q.GetGraph(t.Context(), ended)
		if err != nil && !errors.Is(err, queue.ErrNotFound) {
			t.Fatal(err)
		}
		return err != nil
	}, "the finished graph to expire")
	if _, err := q.GraphNode(t.Context(), ended, "x"); !errors.Is(err, queue.ErrNotFound) {
		t.Errorf("GraphNode of an expired graph: %v, want ErrNotFound", err)
	}
	if got := onlyGraph(t, q); got != running {
		t.Errorf("ListGraphs lists %s, want the running graph %s alone", got, running)
	}
	if keys, err := rdb.Keys(t.Context(), "{"+p+":%G:"+ended+"}*").Result(); err != nil || len(keys) != 0 {
		t.Errorf("the expired graph's keys: %v, %v; want none", keys, err)
	}
	a := nodesReady(t, q, "the running graph", "a")["a"]
	if err := testutil.Complete(t.Context(), q, driver.Completion{Lease: a.Lease(), Outcome: driver.OutcomeDone, Graph: running}); err != nil {
		t.Fatal(err)
	}
	nodesReady(t, q, "after a", "b")
}
