package dag

import (
	"context"
	"errors"
	"fmt"
	"maps"

	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// ErrNoGraphs reports a store (or Pusher) that keeps no graphs: it lacks
// driver.Graphs. It matches queue.ErrUnsupported.
var ErrNoGraphs = fmt.Errorf("dag: the store keeps no graphs: %w", queue.ErrUnsupported)

// Graph is a workflow being declared: its nodes and their dependencies.
// Build it with New and Add, then Dispatch it. A Graph is not safe for
// concurrent use.
type Graph struct {
	name  string
	nodes []driver.GraphNode
}

// New returns an empty graph labelled name (shown on the dashboard; at
// most driver.MaxGraphName bytes).
func New(name string) *Graph { return &Graph{name: name} }

// Option sets how a node depends on others (After, AllowFailed).
type Option func(*driver.GraphNode)

// After makes the node run once every node named has succeeded. Each must
// have been added before.
func After(names ...string) Option {
	return func(n *driver.GraphNode) { n.After = append(n.After, names...) }
}

// AllowFailed makes the node count a dependency that was dead-lettered as
// satisfied, so it runs after its dependencies finished, failed or not
// (a cancelled dependency still cancels it).
func AllowFailed() Option { return func(n *driver.GraphNode) { n.AllowFailed = true } }

// Add adds the node name running job j (built with queue.NewJob; it gets
// an ID if it has none) and returns g. A mistake (a name used twice, a
// dependency not added before) is reported by Dispatch.
func (g *Graph) Add(name string, j queue.Job, opts ...Option) *Graph {
	n := driver.GraphNode{Name: name, Job: j}
	for _, o := range opts {
		o(&n)
	}
	if n.Job.ID == "" {
		n.Job.ID = driver.NewID()
	}
	n.Job.Meta = maps.Clone(n.Job.Meta)
	g.nodes = append(g.nodes, n)
	return g
}

// Len is how many nodes g has.
func (g *Graph) Len() int { return len(g.nodes) }

// Dispatch stores g through p, which must be a driver.GraphDispatcher (a
// store with driver.Graphs, or a driver's transaction Pusher such as
// sqlqueue's TxPusher, so the graph commits with the caller's rows), and
// returns the graph's new ID. Every node is stored and the nodes without
// dependencies pushed in one step, or nothing is. It returns an error
// matching driver.ErrGraph for a graph beyond its rules (see the package
// documentation), and ErrNoGraphs when p keeps no graphs.
func Dispatch(ctx context.Context, p queue.Pusher, g *Graph) (string, error) {
	gd, ok := p.(driver.GraphDispatcher)
	if !ok {
		return "", fmt.Errorf("%w (%T is no driver.GraphDispatcher)", ErrNoGraphs, p)
	}
	id := driver.NewID()
	rec := driver.GraphRecord{ID: id, Name: g.name}
	nodes := make([]driver.GraphNode, len(g.nodes))
	for i, n := range g.nodes {
		n.Job.Meta = maps.Clone(n.Job.Meta)
		if n.Job.Meta == nil {
			n.Job.Meta = make(map[string]string, 2)
		}
		for _, k := range []string{driver.MetaGraph, driver.MetaGraphNode} {
			if _, ok := n.Job.Meta[k]; ok {
				return "", fmt.Errorf("%w: node %q's job already carries %s", driver.ErrGraph, n.Name, k)
			}
		}
		n.Job.Meta[driver.MetaGraph] = id
		n.Job.Meta[driver.MetaGraphNode] = n.Name
		nodes[i] = n
	}
	if err := driver.ValidateGraph(rec, nodes); err != nil {
		return "", err
	}
	if err := gd.PushGraph(ctx, rec, nodes); err != nil {
		return "", err
	}
	return id, nil
}

// graphs returns q's Graphs, or ErrNoGraphs.
func graphs(q queue.Queue) (driver.Graphs, error) {
	gs := driver.CapabilitiesOf(q).Graphs
	if gs == nil {
		return nil, fmt.Errorf("%w (%T has no driver.Graphs)", ErrNoGraphs, q)
	}
	return gs, nil
}

// Get reads graph id and its nodes in the order they were added, or
// returns an error matching queue.ErrNotFound.
func Get(ctx context.Context, q queue.Queue, id string) (driver.GraphInfo, []driver.GraphNodeInfo, error) {
	gs, err := graphs(q)
	if err != nil {
		return driver.GraphInfo{}, nil, err
	}
	return gs.GetGraph(ctx, id)
}

// Cancel cancels graph id: its waiting nodes are cancelled and its pending
// nodes' jobs too (running ones as queue.CancelJob does). It returns the
// graph as it is afterwards, or an error matching queue.ErrNotFound.
func Cancel(ctx context.Context, q queue.Queue, id string) (driver.GraphInfo, error) {
	gs, err := graphs(q)
	if err != nil {
		return driver.GraphInfo{}, err
	}
	return gs.CancelGraph(ctx, id)
}

// Retry runs graph id's failed nodes again, and lets the nodes that their
// failure (or the graph's cancel) kept from running wait for their
// dependencies once more; a node whose own job was cancelled stays
// cancelled, with its dependants. It reports how many failed nodes it
// retried, or an error matching queue.ErrNotFound.
func Retry(ctx context.Context, q queue.Queue, id string) (int, error) {
	gs, err := graphs(q)
	if err != nil {
		return 0, err
	}
	return gs.RetryGraph(ctx, id)
}

// Of returns the graph and node that job j runs for, or "" and "".
func Of(j *queue.Job) (graph, node string) {
	return j.Meta[driver.MetaGraph], j.Meta[driver.MetaGraphNode]
}

// ErrNotDependency reports that Result was asked for a node that is not
// one of the calling node's dependencies.
var ErrNotDependency = errors.New("dag: not a dependency of this node")

// Result reads the result (queue.SetResult) of dep, a node the calling
// node's job comes After, and decodes it into a T. Call it from the
// handler of a graph's node, whose ctx names the job. It returns an error
// matching queue.ErrNoResult when dep succeeded without a result (or
// failed, for an AllowFailed node), ErrNotDependency when dep is not one of
// the node's dependencies, and queue.ErrUnsupported outside a node's
// handler or on a store without driver.Graphs and driver.Results.
func Result[T any](ctx context.Context, q queue.Queue, dep string) (T, error) {
	var v T
	j, ok := queue.JobFromContext(ctx)
	id, node := Of(&j)
	if !ok || id == "" {
		return v, fmt.Errorf("dag: reading %s's result: %w: not in a graph node's handler", dep, queue.ErrUnsupported)
	}
	gs, err := graphs(q)
	if err != nil {
		return v, err
	}
	self, err := gs.GraphNode(ctx, id, node)
	if err != nil {
		return v, err
	}
	found := false
	for _, d := range self.After {
		found = found || d == dep
	}
	if !found {
		return v, fmt.Errorf("dag: reading %s's result in node %s: %w", dep, node, ErrNotDependency)
	}
	n, err := gs.GraphNode(ctx, id, dep)
	if err != nil {
		return v, err
	}
	return queue.ResultOf[T](ctx, q, n.JobID, 0)
}
