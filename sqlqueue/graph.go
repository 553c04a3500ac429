package sqlqueue

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	queue "github.com/meridianjobs/meridian/queue/driver"
	"github.com/meridianjobs/meridian/sqlqueue/internal/hook"
)

// Graphs (package dag, driver.Graphs) live in three tables: <table>_graphs,
// one row per graph; <table>_graph_nodes, one row per node with its state,
// the count of its dependencies not yet satisfied (waiting), whether its
// job was ever pushed, and its job, encoded, to push when the count
// reaches 0; and <table>_graph_edges, one row per dependency, by the
// nodes' positions in the graph (seq).
//
// A node's outcome is recorded in one write transaction with its job's
// ack, dead-lettering or cancel (completeNode): the node's row moves first
// by a statement conditional on its state (driver.NodeTransition), so
// only one transaction moves it; then the job's row, under its lease (no
// lease, nothing done); then each waiting dependant, in seq order, by a
// statement conditional on its state: a decrement of its count (the
// transaction that takes it to 0 pushes the dependant's job and marks it
// pending) or a cancel, which goes on to the dependants' dependants. Two
// transactions that finish two dependencies of one node at once both
// update its row, so the second waits for the first and reads its count
// after it: the node is pushed once. Statements are the same in every
// dialect.

var _ queue.Graphs = (*Queue)(nil)

// nodeChunk and edgeChunk bound the rows of one insert.
const (
	nodeChunk = 200
	edgeChunk = 1000
)

// errGraphGone ends a transaction on a graph that does not exist.
var errGraphGone = errors.New("graph not found")

// PushGraph stores rec and nodes and pushes the roots' jobs in one write
// transaction (see queue.GraphDispatcher).
func (q *Queue) PushGraph(ctx context.Context, rec queue.GraphRecord, nodes []queue.GraphNode) error {
	if err := queue.ValidateGraph(rec, nodes); err != nil {
		return err
	}
	if err := q.use(ctx); err != nil {
		return err
	}
	var roots []queue.Job
	err := q.batchTx(ctx, func(st statements, now int64) error {
		var err error
		roots, err = q.pushGraph(ctx, st, rec, nodes, now)
		return err
	})
	if err != nil {
		return q.graphErr(ctx, err, "pushing graph %s of %d nodes", rec.ID, len(nodes))
	}
	q.wakeFor(roots, allStored(roots))
	q.announce(roots, allStored(roots))
	return nil
}

// PushGraph stores rec and nodes and pushes the roots' jobs in the
// caller's transaction (see queue.GraphDispatcher): the graph exists if
// and only if the transaction commits.
func (p *TxPusher) PushGraph(ctx context.Context, rec queue.GraphRecord, nodes []queue.GraphNode) error {
	if err := queue.ValidateGraph(rec, nodes); err != nil {
		return err
	}
	if err := p.q.useTx(ctx, p.st); err != nil {
		return err
	}
	if _, err := p.q.pushGraph(ctx, p.st, rec, nodes, micros(time.Now())); err != nil {
		return p.q.graphErr(ctx, err, "pushing graph %s of %d nodes in a transaction", rec.ID, len(nodes))
	}
	return nil
}

// graphErr wraps err of an operation on a graph, keeping the sentinels.
func (q *Queue) graphErr(ctx context.Context, err error, format string, args ...any) error {
	switch {
	case errors.Is(err, errGraphGone):
		return fmt.Errorf("sqlqueue: "+format+": %w", append(args, queue.ErrNotFound)...)
	case errors.Is(err, queue.ErrDuplicate):
		return fmt.Errorf("sqlqueue: "+format+": %w", append(args, err)...)
	}
	return q.wrap(ctx, err, format, args...)
}

func (q *Queue) pushGraph(ctx context.Context, st statements, rec queue.GraphRecord, nodes []queue.GraphNode, now int64) ([]queue.Job, error) {
	if _, err := st.Exec(ctx, q.stmt(qGraphInsert), rec.ID, rec.Name, now); err != nil {
		if q.d.isUniqueViolation(err) {
			return nil, queue.ErrDuplicate
		}
		return nil, err
	}
	seqOf := make(map[string]int, len(nodes))
	var rows, edges []any
	var roots []queue.Job
	for i, n := range nodes {
		seqOf[n.Name] = i
		state, pushed := queue.NodeWaiting, 0
		if len(n.After) == 0 {
			state, pushed = queue.NodePending, 1
			roots = append(roots, n.Job)
		}
		job, err := queue.EncodeNodeJob(n.Job) // kept for RetryGraph, roots' too
		if err != nil {
			return nil, err
		}
		allow := 0
		if n.AllowFailed {
			allow = 1
		}
		rows = append(rows, rec.ID, i, n.Name, n.Job.ID, string(state), len(n.After), pushed, allow, queue.EncodeAfter(n.After), job)
		for _, d := range n.After {
			edges = append(edges, rec.ID, seqOf[d], i)
		}
	}
	if err := q.insertChunks(ctx, st, qGraphNodesInsert, rows, 10, nodeChunk); err != nil {
		return nil, err
	}
	if err := q.insertChunks(ctx, st, qGraphEdgesInsert, edges, 3, edgeChunk); err != nil {
		return nil, err
	}
	stored, err := q.pushMany(ctx, st, true, roots)
	if err != nil {
		return nil, err
	}
	for i, ok := range stored {
		if !ok {
			return nil, &queue.DuplicateError{ExistingID: roots[i].ID}
		}
	}
	return roots, nil
}

// insertChunks runs the list statement id over args, width arguments a
// row, at most chunk rows a statement.
func (q *Queue) insertChunks(ctx context.Context, st statements, id query, args []any, width, chunk int) error {
	for len(args) > 0 {
		n := min(len(args)/width, chunk)
		if _, err := st.Exec(ctx, q.stmtN(id, n), args[:width*n]...); err != nil {
			return err
		}
		args = args[width*n:]
	}
	return nil
}

// moveNode moves the node of job jobID in graph by outcome o, if it
// moves at all (see queue.NodeTransition), and returns its position and
// where it came from and went.
func (q *Queue) moveNode(ctx context.Context, st statements, graph, jobID string, o queue.Outcome) (seq int64, from, to queue.NodeState, err error) {
	for _, f := range []queue.NodeState{queue.NodePending, queue.NodeFailed} {
		t, ok := queue.NodeTransition(f, o)
		if !ok {
			continue
		}
		n, err := st.Exec(ctx, q.stmt(qNodeMove), string(t), graph, jobID, string(f))
		if err != nil {
			return 0, "", "", err
		}
		if n > 0 {
			from, to = f, t
			break
		}
	}
	if to == "" {
		return 0, "", "", nil
	}
	err = queryRow(ctx, st, q.stmt(qNodeSeq), []any{graph, jobID}, &seq)
	return seq, from, to, err
}

// dependant is a waiting dependant of a node.
type dependant struct {
	seq         int64
	allowFailed bool
}

// dependants reads the waiting dependants of node seq, in seq order.
func (q *Queue) dependants(ctx context.Context, st statements, graph string, seq int64) ([]dependant, error) {
	rows, err := st.Query(ctx, q.stmt(qNodeDependants), graph, seq)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []dependant
	for rows.Next() {
		var d dependant
		var allow int
		if err := rows.Scan(&d.seq, &allow); err != nil {
			return nil, err
		}
		d.allowFailed = allow != 0
		out = append(out, d)
	}
	return out, rows.Err()
}

// settle moves the waiting dependants of node seq, which has just gone
// from pending to state to, and pushes those that became ready, in st's
// transaction; it returns their jobs.
func (q *Queue) settle(ctx context.Context, st statements, graph string, seq int64, to queue.NodeState) ([]queue.Job, error) {
	ds, err := q.dependants(ctx, st, graph, seq)
	if err != nil {
		return nil, err
	}
	var ready []queue.Job
	for _, d := range ds {
		if to != queue.NodeDone && (to != queue.NodeFailed || !d.allowFailed) {
			if err := q.cancelWaiting(ctx, st, graph, d.seq); err != nil {
				return nil, err
			}
			continue
		}
		n, err := st.Exec(ctx, q.stmt(qNodeSatisfy), graph, d.seq)
		if err != nil {
			return nil, err
		}
		if n == 0 {
			continue
		}
		var waiting int
		var enc string
		if err := queryRow(ctx, st, q.stmt(qNodeReadyJob), []any{graph, d.seq}, &waiting, &enc); err != nil {
			return nil, err
		}
		if waiting > 0 {
			continue
		}
		j, err := q.readyNode(ctx, st, graph, d.seq, enc)
		if err != nil {
			return nil, err
		}
		ready = append(ready, j)
	}
	return q.pushNodes(ctx, st, ready)
}

// readyNode marks node seq pending and returns its job, decoded from enc.
func (q *Queue) readyNode(ctx context.Context, st statements, graph string, seq int64, enc string) (queue.Job, error) {
	j, err := queue.DecodeNodeJob(enc)
	if err != nil {
		return queue.Job{}, err
	}
	_, err = st.Exec(ctx, q.stmt(qNodeSet), string(queue.NodePending), 0, 1, graph, seq)
	return j, err
}

// pushNodes pushes ready nodes' jobs in st's transaction and returns
// those stored (a job whose ID an active job holds is left to it).
func (q *Queue) pushNodes(ctx context.Context, st statements, jobs []queue.Job) ([]queue.Job, error) {
	if len(jobs) == 0 {
		return nil, nil
	}
	stored, err := q.pushMany(ctx, st, true, jobs)
	if err != nil {
		return nil, err
	}
	out := jobs[:0]
	for i, j := range jobs {
		if stored[i] {
			out = append(out, j)
		}
	}
	return out, nil
}

// cancelWaiting cancels the waiting node seq and, through it, its waiting
// dependants.
func (q *Queue) cancelWaiting(ctx context.Context, st statements, graph string, seq int64) error {
	n, err := st.Exec(ctx, q.stmt(qNodeCancelWaiting), graph, seq)
	if err != nil || n == 0 {
		return err
	}
	ds, err := q.dependants(ctx, st, graph, seq)
	if err != nil {
		return err
	}
	for _, d := range ds {
		if err := q.cancelWaiting(ctx, st, graph, d.seq); err != nil {
			return err
		}
	}
	return nil
}

// completeNode records the outcome c of a node of graph c.Graph in one
// write transaction with its job's ack (and result), dead-lettering or
// cancel (Complete's part for graph nodes).
func (q *Queue) completeNode(ctx context.Context, c queue.Completion) error {
	l, graph, o := c.Lease, c.Graph, c.Outcome
	var pushed []queue.Job
	err := q.batchTx(ctx, func(st statements, now int64) error {
		pushed = nil
		stmt, args, ok := q.finishQuery(o, c.Reason, c.MaxAttempts, now)
		if !ok {
			return fmt.Errorf("outcome %s does not finish a job", o)
		}
		seq, from, to, err := q.moveNode(ctx, st, graph, l.JobID, o)
		if err != nil {
			return err
		}
		n, err := q.execLeased(ctx, st, stmt, l, now, args...)
		if err != nil {
			return err
		}
		if n == 0 {
			return errLeaseGone
		}
		if o == queue.OutcomeDone {
			// A node that was pending belongs to a graph that runs: its
			// result is kept until the graph finishes (finishGraphs).
			if err := q.keepResult(ctx, st, c, time.Now(), from == queue.NodePending); err != nil {
				return err
			}
		}
		if from != queue.NodePending {
			return nil // not a node (of a graph kept), moved already, or a failed node retried by hand
		}
		pushed, err = q.settle(ctx, st, graph, seq, to)
		return err
	})
	if errors.Is(err, errLeaseGone) {
		return fmt.Errorf("sqlqueue: finishing graph node %s: %w", l.JobID, queue.ErrLeaseLost)
	}
	if err != nil {
		return q.wrap(ctx, err, "finishing graph node %s as %s", l.JobID, o)
	}
	if len(pushed) > 0 {
		q.wakeFor(pushed, allStored(pushed))
	}
	return nil
}

// cancelNode records, in st's transaction, that the job jobID of graph
// was cancelled (Cancel): its node and waiting dependants are cancelled.
// It runs before the job's own change (the lock order of completeNode).
func (q *Queue) cancelNode(ctx context.Context, st statements, graph, jobID string) error {
	seq, from, to, err := q.moveNode(ctx, st, graph, jobID, queue.OutcomeCancelled)
	if err != nil || from != queue.NodePending {
		return err
	}
	_, err = q.settle(ctx, st, graph, seq, to)
	return err
}

// graphRow reads graph id's row in st, or errGraphGone.
func (q *Queue) graphRow(ctx context.Context, st statements, id string) (queue.GraphInfo, error) {
	var g queue.GraphInfo
	var created, cancelled int64
	err := queryRow(ctx, st, q.stmt(qGraphByID), []any{id}, &g.ID, &g.Name, &created, &cancelled)
	if errors.Is(err, sql.ErrNoRows) {
		return g, errGraphGone
	}
	if err != nil {
		return g, err
	}
	g.CreatedAt = fromMicros(created)
	if cancelled != 0 {
		g.CancelledAt = fromMicros(cancelled)
	}
	return g, nil
}

// countGraph fills g's counters from its nodes.
func (q *Queue) countGraph(ctx context.Context, st statements, g *queue.GraphInfo) error {
	rows, err := st.Query(ctx, q.stmt(qGraphCounts), g.ID)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var s string
		var n int
		if err := rows.Scan(&s, &n); err != nil {
			return err
		}
		g.Total += n
		g.Count(queue.NodeState(s), n)
	}
	return rows.Err()
}

// CancelGraph cancels graph id in one write transaction (see
// queue.Graphs).
func (q *Queue) CancelGraph(ctx context.Context, id string) (queue.GraphInfo, error) {
	if err := q.use(ctx); err != nil {
		return queue.GraphInfo{}, err
	}
	err := q.batchTx(ctx, func(st statements, now int64) error {
		g, err := q.graphRow(ctx, st, id)
		if err != nil {
			return err
		}
		if err := q.countGraph(ctx, st, &g); err != nil || g.Finished() {
			return err
		}
		if _, err := st.Exec(ctx, q.stmt(qGraphCancelMark), now, id); err != nil {
			return err
		}
		if _, err := st.Exec(ctx, q.stmt(qGraphCancelWaiting), id); err != nil {
			return err
		}
		jobs, err := queryStrings(ctx, st, q.stmt(qGraphPendingJobs), id)
		if err != nil {
			return err
		}
		for _, jid := range jobs {
			if _, err := st.Exec(ctx, q.stmt(qNodeMove), string(queue.NodeCancelled), id, jid, string(queue.NodePending)); err != nil {
				return err
			}
			if _, err := st.Exec(ctx, q.stmt(qCancelJob), now, now, queue.ErrCancelled.Error(), jid); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return queue.GraphInfo{}, q.graphErr(ctx, err, "cancelling graph %s", id)
	}
	info, _, err := q.GetGraph(ctx, id)
	return info, err
}

// gnode is a node as RetryGraph reads it.
type gnode struct {
	seq        int64
	jobID      string
	state      queue.NodeState
	pushed     bool
	waiting    int
	deps, next []int64
	changed    bool
}

// RetryGraph runs graph id's failed nodes again, in one write transaction
// (see queue.Graphs). It reads the whole graph (at most MaxGraphNodes
// nodes) and writes the nodes that move.
func (q *Queue) RetryGraph(ctx context.Context, id string) (int, error) {
	if err := q.use(ctx); err != nil {
		return 0, err
	}
	retried := 0
	var pushed []queue.Job
	err := q.batchTx(ctx, func(st statements, now int64) error {
		retried, pushed = 0, nil
		if _, err := q.graphRow(ctx, st, id); err != nil {
			return err
		}
		if _, err := st.Exec(ctx, q.stmt(qGraphCancelMark), 0, id); err != nil {
			return err
		}
		// The graph runs again: its done nodes' results are kept until it
		// finishes once more.
		if _, err := st.Exec(ctx, q.stmt(qGraphReopen), id); err != nil {
			return err
		}
		if _, err := st.Exec(ctx, q.stmt(qResultsRepinGraph), pinnedUntil, id); err != nil {
			return err
		}
		nodes, err := q.loadNodes(ctx, st, id)
		if err != nil {
			return err
		}
		move := func(n *gnode, s queue.NodeState) { n.state, n.changed = s, true }
		var ready []*gnode
		for _, n := range nodes {
			if n.state != queue.NodeFailed {
				continue
			}
			k, err := st.Exec(ctx, q.stmt(qRetryDead), now, now, now, n.jobID)
			if err != nil {
				return err
			}
			if k == 0 {
				ready = append(ready, n) // the dead letter is gone: push it anew
			}
			move(n, queue.NodePending)
			retried++
		}
		for _, n := range nodes {
			if n.state == queue.NodeCancelled && !n.pushed {
				move(n, queue.NodeWaiting)
				n.waiting = 0
				for _, d := range n.deps {
					if nodes[d].state != queue.NodeDone {
						n.waiting++
					}
				}
			}
		}
		var cancel func(n *gnode)
		cancel = func(n *gnode) {
			if n.state != queue.NodeWaiting {
				return
			}
			move(n, queue.NodeCancelled)
			for _, d := range n.next {
				cancel(nodes[d])
			}
		}
		for _, n := range nodes {
			switch {
			case n.state == queue.NodeWaiting && n.waiting == 0:
				move(n, queue.NodePending)
				n.pushed = true
				ready = append(ready, n)
			case n.state == queue.NodeCancelled:
				for _, d := range n.next {
					cancel(nodes[d])
				}
			}
		}
		var jobs []queue.Job
		for _, n := range ready {
			var enc string
			if err := queryRow(ctx, st, q.stmt(qNodeJob), []any{id, n.seq}, &enc); err != nil {
				return err
			}
			j, err := queue.DecodeNodeJob(enc)
			if err != nil {
				return err
			}
			jobs = append(jobs, j)
		}
		for _, n := range nodes {
			if !n.changed {
				continue
			}
			pushedFlag := 0
			if n.pushed {
				pushedFlag = 1
			}
			if _, err := st.Exec(ctx, q.stmt(qNodeSet), string(n.state), n.waiting, pushedFlag, id, n.seq); err != nil {
				return err
			}
		}
		pushed, err = q.pushNodes(ctx, st, jobs)
		return err
	})
	if err != nil {
		return 0, q.graphErr(ctx, err, "retrying graph %s", id)
	}
	if len(pushed) > 0 {
		q.wakeFor(pushed, allStored(pushed))
	}
	q.wake.signal()
	return retried, nil
}

// loadNodes reads graph id's nodes and edges, indexed by seq.
func (q *Queue) loadNodes(ctx context.Context, st statements, id string) ([]*gnode, error) {
	infos, err := q.nodeInfos(ctx, st, qGraphNodes, id)
	if err != nil {
		return nil, err
	}
	nodes := make([]*gnode, len(infos))
	for i, in := range infos {
		nodes[i] = &gnode{seq: int64(i), jobID: in.JobID, state: in.State, pushed: in.pushed, waiting: in.waiting}
	}
	rows, err := st.Query(ctx, q.stmt(qGraphEdges), id)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var from, to int64
		if err := rows.Scan(&from, &to); err != nil {
			return nil, err
		}
		if from < int64(len(nodes)) && to < int64(len(nodes)) {
			nodes[to].deps = append(nodes[to].deps, from)
			nodes[from].next = append(nodes[from].next, to)
		}
	}
	return nodes, rows.Err()
}

// nodeInfo is a node row as read.
type nodeInfo struct {
	queue.GraphNodeInfo
	pushed  bool
	waiting int
}

// nodeInfos runs the node query id (qGraphNodes or qGraphNodeByName) and
// scans its rows.
func (q *Queue) nodeInfos(ctx context.Context, st statements, id query, args ...any) ([]nodeInfo, error) {
	rows, err := st.Query(ctx, q.stmt(id), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []nodeInfo
	for rows.Next() {
		var n nodeInfo
		var seq int64
		var state, deps string
		var pushed, allow int
		if err := rows.Scan(&seq, &n.Name, &n.JobID, &state, &n.waiting, &pushed, &allow, &deps); err != nil {
			return nil, err
		}
		n.State, n.pushed, n.AllowFailed, n.After = queue.NodeState(state), pushed != 0, allow != 0, queue.DecodeAfter(deps)
		out = append(out, n)
	}
	return out, rows.Err()
}

// GetGraph reads graph id and its nodes (see queue.Graphs).
func (q *Queue) GetGraph(ctx context.Context, id string) (queue.GraphInfo, []queue.GraphNodeInfo, error) {
	if err := q.use(ctx); err != nil {
		return queue.GraphInfo{}, nil, err
	}
	st := stmts(q.db)
	g, err := q.graphRow(ctx, st, id)
	if err != nil {
		return queue.GraphInfo{}, nil, q.graphErr(ctx, err, "reading graph %s", id)
	}
	infos, err := q.nodeInfos(ctx, st, qGraphNodes, id)
	if err != nil {
		return queue.GraphInfo{}, nil, q.wrap(ctx, err, "reading graph %s", id)
	}
	out := make([]queue.GraphNodeInfo, len(infos))
	for i, n := range infos {
		out[i] = n.GraphNodeInfo
		g.Total++
		g.Count(n.State, 1)
	}
	return g, out, nil
}

// GraphNode reads one node of graph id (see queue.Graphs).
func (q *Queue) GraphNode(ctx context.Context, id, name string) (queue.GraphNodeInfo, error) {
	if err := q.use(ctx); err != nil {
		return queue.GraphNodeInfo{}, err
	}
	infos, err := q.nodeInfos(ctx, stmts(q.db), qGraphNodeByName, id, name)
	if err != nil {
		return queue.GraphNodeInfo{}, q.wrap(ctx, err, "reading node %s of graph %s", name, id)
	}
	if len(infos) == 0 {
		return queue.GraphNodeInfo{}, fmt.Errorf("sqlqueue: reading node %s of graph %s: %w", name, id, queue.ErrNotFound)
	}
	return infos[0].GraphNodeInfo, nil
}

// ListGraphs pages through the graphs, newest first (see queue.Graphs):
// one read of the page and one count of each graph's nodes by state.
func (q *Queue) ListGraphs(ctx context.Context, f queue.BatchFilter) (queue.GraphPage, error) {
	limit, err := queue.BatchLimit(f.Limit)
	if err != nil {
		return queue.GraphPage{}, err
	}
	if err := q.use(ctx); err != nil {
		return queue.GraphPage{}, err
	}
	st := stmts(q.db)
	var rows hook.Rows
	if f.After == "" {
		rows, err = st.Query(ctx, q.stmt(qGraphs), limit+1)
	} else {
		rows, err = st.Query(ctx, q.stmt(qGraphsAfter), f.After, limit+1)
	}
	if err != nil {
		return queue.GraphPage{}, q.wrap(ctx, err, "listing graphs")
	}
	var page queue.GraphPage
	for rows.Next() {
		var g queue.GraphInfo
		var created, cancelled int64
		if err := rows.Scan(&g.ID, &g.Name, &created, &cancelled); err != nil {
			rows.Close()
			return queue.GraphPage{}, q.wrap(ctx, err, "listing graphs")
		}
		g.CreatedAt = fromMicros(created)
		if cancelled != 0 {
			g.CancelledAt = fromMicros(cancelled)
		}
		page.Graphs = append(page.Graphs, g)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return queue.GraphPage{}, q.wrap(ctx, err, "listing graphs")
	}
	if len(page.Graphs) > limit {
		page.Graphs = page.Graphs[:limit]
		page.Next = page.Graphs[limit-1].ID
	}
	for i := range page.Graphs {
		if err := q.countGraph(ctx, st, &page.Graphs[i]); err != nil {
			return queue.GraphPage{}, q.wrap(ctx, err, "listing graphs")
		}
	}
	return page, nil
}

// errGraphOpen ends the transaction of finishGraph on a graph that a
// retry opened again.
var errGraphOpen = errors.New("graph runs again")

// finishGraphs marks finished, with the time of this maintenance pass,
// the graphs that have no waiting or pending node left, up to
// maxPruneBatches rounds of 100, and dates their nodes' pinned results
// (kept from now for their retention). A graph finishes when its last
// node does; its end is recorded here, at most a maintenance interval
// later, and not in the node's transaction, so that the nodes of one
// graph finish without waiting for each other on the graph's row.
func (q *Queue) finishGraphs(ctx context.Context, now time.Time) (int, error) {
	total := 0
	for range maxPruneBatches {
		ids, err := queryStrings(ctx, stmts(q.db), q.stmt(qGraphsEnded))
		if err != nil || len(ids) == 0 {
			return total, err
		}
		for _, id := range ids {
			err := q.fencedTx(ctx, func(st statements) error {
				// The graph's row first (RetryGraph's first change too),
				// then a fresh look at its nodes: a retry that committed
				// meanwhile opened it again.
				n, err := st.Exec(ctx, q.stmt(qGraphEnd), micros(now), id)
				if err != nil || n == 0 {
					return err
				}
				var one int
				err = queryRow(ctx, st, q.stmt(qGraphOpenNode), []any{id}, &one)
				switch {
				case err == nil:
					return errGraphOpen
				case !errors.Is(err, sql.ErrNoRows):
					return err
				}
				total++
				return q.releaseResults(ctx, st, qResultsReleaseGraph, id, micros(now))
			})
			if err != nil && !errors.Is(err, errGraphOpen) {
				return total, err
			}
		}
		if len(ids) < 100 {
			return total, nil
		}
	}
	return total, nil
}

// pruneGraphs deletes up to maxPruneBatches rounds of 100 graphs that
// finished before cutoff, each round with their nodes and edges in one
// transaction. Their results expire by themselves.
func (q *Queue) pruneGraphs(ctx context.Context, cutoff time.Time) (int, error) {
	return q.pruneFinished(ctx, qFinishedGraphs, cutoff, qDeleteGraphEdges, qDeleteGraphNodes, qDeleteGraphs)
}
