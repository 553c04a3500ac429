package memqueue

import (
	"context"
	"fmt"
	"time"

	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// maxGraphs is how many graphs a Queue keeps: dispatching one more forgets
// the oldest finished one (GetGraph then answers ErrNotFound), so a
// long-lived Queue does not grow with every graph.
const maxGraphs = 1000

// graph is one graph's record and nodes (see driver.Graphs).
type graph struct {
	info   driver.GraphInfo // counters kept as nodes move
	ended  bool             // finished, its nodes' results dated (endLocked)
	nodes  []*gnode         // in dispatch order, which is topological
	byJob  map[string]*gnode
	byName map[string]*gnode
}

// gnode is one node of a graph.
type gnode struct {
	def        driver.GraphNode
	state      driver.NodeState
	waiting    int // dependencies not yet satisfied
	pushed     bool
	deps       []*gnode
	dependants []*gnode
}

var _ driver.Graphs = (*Queue)(nil)

// PushGraph stores rec and nodes and pushes the roots' jobs in one
// critical section (see driver.GraphDispatcher).
func (q *Queue) PushGraph(ctx context.Context, rec driver.GraphRecord, nodes []driver.GraphNode) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memqueue: pushing graph %s: %w", rec.ID, err)
	}
	if err := driver.ValidateGraph(rec, nodes); err != nil {
		return err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.graphs[rec.ID] != nil {
		return fmt.Errorf("memqueue: pushing graph %s: %w", rec.ID, queue.ErrDuplicate)
	}
	g := &graph{byJob: make(map[string]*gnode, len(nodes)), byName: make(map[string]*gnode, len(nodes))}
	for _, n := range nodes {
		gn := &gnode{def: n, state: driver.NodeWaiting, waiting: len(n.After)}
		for _, d := range n.After {
			dep := g.byName[d]
			gn.deps = append(gn.deps, dep)
			dep.dependants = append(dep.dependants, gn)
		}
		if gn.waiting == 0 {
			if old := q.jobs[n.Job.ID]; old != nil && isActive(old.state) {
				return fmt.Errorf("memqueue: pushing graph %s: node %s: %w", rec.ID, n.Name,
					&driver.DuplicateError{ExistingID: n.Job.ID})
			}
		}
		g.nodes = append(g.nodes, gn)
		g.byJob[n.Job.ID] = gn
		g.byName[n.Name] = gn
	}
	now := q.now()
	g.info = driver.GraphInfo{ID: rec.ID, Name: rec.Name, Total: len(nodes), Waiting: len(nodes), CreatedAt: now}
	for _, gn := range g.nodes {
		if gn.waiting == 0 {
			q.readyNodeLocked(g, gn, now)
		}
	}
	if q.graphs == nil {
		q.graphs = make(map[string]*graph)
	}
	q.graphs[rec.ID] = g
	q.graphList = append(q.graphList, g)
	q.forgetGraphsLocked()
	return nil
}

// forgetGraphsLocked forgets the oldest finished graphs beyond maxGraphs.
func (q *Queue) forgetGraphsLocked() {
	over := len(q.graphList) - maxGraphs
	if over <= 0 {
		return
	}
	kept := q.graphList[:0]
	for _, g := range q.graphList {
		if over > 0 && g.info.Finished() {
			delete(q.graphs, g.info.ID)
			over--
			continue
		}
		kept = append(kept, g)
	}
	clear(q.graphList[len(kept):])
	q.graphList = kept
}

// moveLocked sets n's state to s, keeping g's counters.
func (g *graph) moveLocked(n *gnode, s driver.NodeState) {
	g.info.Count(n.state, -1)
	g.info.Count(s, 1)
	n.state = s
}

// readyNodeLocked pushes n's job: n is pending. A job ID held by an
// active job (only by a job pushed by hand with a node's ID) is left to
// that job.
func (q *Queue) readyNodeLocked(g *graph, n *gnode, now time.Time) {
	g.moveLocked(n, driver.NodePending)
	n.pushed = true
	_ = q.pushLocked(n.def.Job, now)
}

// satisfyLocked counts one dependency of the waiting node n as satisfied.
func (q *Queue) satisfyLocked(g *graph, n *gnode, now time.Time) {
	if n.state != driver.NodeWaiting {
		return
	}
	if n.waiting--; n.waiting == 0 {
		q.readyNodeLocked(g, n, now)
	}
}

// cancelWaitingLocked cancels the waiting node n and, through it, its
// waiting dependants.
func cancelWaitingLocked(g *graph, n *gnode) {
	if n.state != driver.NodeWaiting {
		return
	}
	g.moveLocked(n, driver.NodeCancelled)
	for _, d := range n.dependants {
		cancelWaitingLocked(g, d)
	}
}

// nodeOutcomeLocked moves n by the outcome o of its job and settles its
// dependants (see driver.Graphs).
func (q *Queue) nodeOutcomeLocked(g *graph, n *gnode, o driver.Outcome, now time.Time) {
	from := n.state
	to, ok := driver.NodeTransition(from, o)
	if !ok {
		return
	}
	g.moveLocked(n, to)
	if from != driver.NodePending {
		return // a failed node retried by hand: its dependants were settled
	}
	for _, d := range n.dependants {
		switch {
		case to == driver.NodeDone, to == driver.NodeFailed && d.def.AllowFailed:
			q.satisfyLocked(g, d, now)
		default:
			cancelWaitingLocked(g, d)
		}
	}
}

// finishNode records the outcome of the node under l in graph graphID
// together with its job's ack, dead-lettering or cancel (Complete of an
// outcome with a Graph); limit is a dead letter's attempt limit, res a
// done node's result.
func (q *Queue) finishNode(ctx context.Context, l driver.Lease, graphID string, o driver.Outcome, reason string, limit int, res kept) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memqueue: finishing graph node %s: %w", l.JobID, err)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.now()
	e := q.leasedLocked(l, now.UnixNano())
	if e == nil {
		return fmt.Errorf("memqueue: finishing graph node %s: %w", l.JobID, queue.ErrLeaseLost)
	}
	g := q.graphs[graphID]
	var n *gnode
	if g != nil {
		n = g.byJob[l.JobID]
	}
	// A pending node's graph runs: its result is kept until the graph
	// finishes (endLocked).
	if !q.endMemberLocked(e, o, reason, limit, res, n != nil && n.state == driver.NodePending, now) {
		return fmt.Errorf("memqueue: finishing graph node %s: outcome %s does not finish a job", l.JobID, o)
	}
	if n != nil {
		q.nodeOutcomeLocked(g, n, o, now)
		q.endLocked(g, now)
	}
	return nil
}

// endLocked records that g finished, if it just did: its nodes' results
// are kept from now for their retention.
func (q *Queue) endLocked(g *graph, now time.Time) {
	if g.ended || !g.info.Finished() {
		return
	}
	g.ended = true
	for _, n := range g.nodes {
		q.releaseResultLocked(n.def.Job.ID, now)
	}
}

// nodeCancelledLocked records e, just cancelled by Cancel or Purge, as
// cancelled in its graph if it is a pending node of one.
func (q *Queue) nodeCancelledLocked(e *entry, now time.Time) {
	g := q.graphs[e.job.Meta[driver.MetaGraph]]
	if g == nil {
		return
	}
	if n := g.byJob[e.job.ID]; n != nil {
		q.nodeOutcomeLocked(g, n, driver.OutcomeCancelled, now)
		q.endLocked(g, now)
	}
}

// CancelGraph cancels graph id (see driver.Graphs).
func (q *Queue) CancelGraph(ctx context.Context, id string) (driver.GraphInfo, error) {
	if err := ctx.Err(); err != nil {
		return driver.GraphInfo{}, fmt.Errorf("memqueue: cancelling graph %s: %w", id, err)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	g := q.graphs[id]
	if g == nil {
		return driver.GraphInfo{}, fmt.Errorf("memqueue: cancelling graph %s: %w", id, queue.ErrNotFound)
	}
	if g.info.Finished() {
		return g.info, nil
	}
	now := q.now()
	g.info.CancelledAt = now
	for _, n := range g.nodes {
		switch n.state {
		case driver.NodeWaiting:
			g.moveLocked(n, driver.NodeCancelled)
		case driver.NodePending:
			if e := q.jobs[n.def.Job.ID]; e != nil {
				q.cancelLocked(e, now)
			}
			g.moveLocked(n, driver.NodeCancelled)
		}
	}
	q.endLocked(g, now)
	return g.info, nil
}

// RetryGraph runs graph id's failed nodes again (see driver.Graphs).
func (q *Queue) RetryGraph(ctx context.Context, id string) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("memqueue: retrying graph %s: %w", id, err)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	g := q.graphs[id]
	if g == nil {
		return 0, fmt.Errorf("memqueue: retrying graph %s: %w", id, queue.ErrNotFound)
	}
	now := q.now()
	g.info.CancelledAt = time.Time{}
	// The graph may run again: its done nodes' results are kept until it
	// finishes once more.
	g.ended = false
	for _, n := range g.nodes {
		if n.state == driver.NodeDone {
			q.repinResultLocked(n.def.Job.ID, now)
		}
	}
	retried := 0
	for _, n := range g.nodes {
		if n.state != driver.NodeFailed {
			continue
		}
		if q.retryDeadLocked(n.def.Job.ID, now) != nil {
			_ = q.pushLocked(n.def.Job, now) // the dead letter is gone: push it anew
		}
		g.moveLocked(n, driver.NodePending)
		retried++
	}
	// Nodes cancelled before their jobs ran wait again, in dispatch
	// (topological) order, so each counts its dependencies as they now
	// stand.
	for _, n := range g.nodes {
		if n.state != driver.NodeCancelled || n.pushed {
			continue
		}
		g.moveLocked(n, driver.NodeWaiting)
		n.waiting = 0
		for _, d := range n.deps {
			if d.state != driver.NodeDone {
				n.waiting++
			}
		}
	}
	for _, n := range g.nodes {
		switch {
		case n.state == driver.NodeWaiting && n.waiting == 0:
			q.readyNodeLocked(g, n, now)
		case n.state == driver.NodeCancelled:
			for _, d := range n.dependants {
				cancelWaitingLocked(g, d)
			}
		}
	}
	q.endLocked(g, now) // nothing to retry
	return retried, nil
}

// GetGraph reads graph id and its nodes (see driver.Graphs).
func (q *Queue) GetGraph(ctx context.Context, id string) (driver.GraphInfo, []driver.GraphNodeInfo, error) {
	if err := ctx.Err(); err != nil {
		return driver.GraphInfo{}, nil, fmt.Errorf("memqueue: reading graph %s: %w", id, err)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	g := q.graphs[id]
	if g == nil {
		return driver.GraphInfo{}, nil, fmt.Errorf("memqueue: reading graph %s: %w", id, queue.ErrNotFound)
	}
	out := make([]driver.GraphNodeInfo, len(g.nodes))
	for i, n := range g.nodes {
		out[i] = n.infoLocked()
	}
	return g.info, out, nil
}

func (n *gnode) infoLocked() driver.GraphNodeInfo {
	return driver.GraphNodeInfo{Name: n.def.Name, JobID: n.def.Job.ID, State: n.state,
		After: append([]string(nil), n.def.After...), AllowFailed: n.def.AllowFailed}
}

// GraphNode reads one node of graph id (see driver.Graphs).
func (q *Queue) GraphNode(ctx context.Context, id, name string) (driver.GraphNodeInfo, error) {
	if err := ctx.Err(); err != nil {
		return driver.GraphNodeInfo{}, fmt.Errorf("memqueue: reading node %s of graph %s: %w", name, id, err)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	g := q.graphs[id]
	if g == nil || g.byName[name] == nil {
		return driver.GraphNodeInfo{}, fmt.Errorf("memqueue: reading node %s of graph %s: %w", name, id, queue.ErrNotFound)
	}
	return g.byName[name].infoLocked(), nil
}

// ListGraphs pages through the graphs, newest first (see driver.Graphs).
func (q *Queue) ListGraphs(ctx context.Context, f driver.BatchFilter) (driver.GraphPage, error) {
	if err := ctx.Err(); err != nil {
		return driver.GraphPage{}, fmt.Errorf("memqueue: listing graphs: %w", err)
	}
	limit, err := driver.BatchLimit(f.Limit)
	if err != nil {
		return driver.GraphPage{}, err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	i := len(q.graphList) - 1
	if f.After != "" {
		i = -1
		for k, g := range q.graphList {
			if g.info.ID == f.After {
				i = k - 1
				break
			}
		}
	}
	var page driver.GraphPage
	for ; i >= 0 && len(page.Graphs) < limit; i-- {
		page.Graphs = append(page.Graphs, q.graphList[i].info)
	}
	if i >= 0 && len(page.Graphs) > 0 {
		page.Next = page.Graphs[len(page.Graphs)-1].ID
	}
	return page, nil
}
