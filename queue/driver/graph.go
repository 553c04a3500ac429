package driver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// Meta keys of graphs (workflows as a DAG, see package dag).
const (
	// MetaGraph names, on a graph's node job, the graph's ID. The Worker
	// reads it to record the node's outcome in the graph (Completion.Graph);
	// users do not write it.
	MetaGraph = "meridian.graph"
	// MetaGraphNode names, on a graph's node job, the node's name.
	MetaGraphNode = "meridian.graph_node"
)

// Limits of graphs, the same on every driver.
const (
	// MaxGraphNodes is the most nodes one graph may have.
	MaxGraphNodes = 10000
	// MaxGraphEdges is the most dependencies (After entries) one graph may
	// have in all.
	MaxGraphEdges = 100000
	// MaxGraphNodeName is the most bytes a node's name may have.
	MaxGraphNodeName = 100
	// MaxGraphName is the most bytes a graph's name may have.
	MaxGraphName = 255
)

// Errors of graphs.
var (
	// ErrGraph reports a graph that cannot be dispatched as given.
	ErrGraph = errors.New("queue: invalid graph")
)

// NodeState is where a graph's node stands.
type NodeState string

// The states of a node.
const (
	// NodeWaiting: a dependency has not succeeded yet; the node's job is
	// not in the queue.
	NodeWaiting NodeState = "waiting"
	// NodePending: the node's job was pushed and has not finished (ready,
	// scheduled or running).
	NodePending   NodeState = "pending"
	NodeDone      NodeState = "done"
	NodeFailed    NodeState = "failed" // its job was dead-lettered
	NodeCancelled NodeState = "cancelled"
)

// GraphNode is one node of a graph as it is dispatched (PushGraph).
type GraphNode struct {
	// Name is the node's name, unique in its graph.
	Name string
	// Job is the node's job, with its ID, carrying MetaGraph and
	// MetaGraphNode. It is pushed when the node becomes ready.
	Job Job
	// After names the nodes this node depends on, each before it in the
	// graph's node list (so a graph has no cycles).
	After []string
	// AllowFailed makes a dependency that is dead-lettered count as
	// satisfied for this node, instead of cancelling it.
	AllowFailed bool
}

// GraphRecord is what a store with Graphs keeps of a graph besides its
// nodes.
type GraphRecord struct {
	ID   string
	Name string
}

// GraphInfo is a graph's record and progress, read from the store.
type GraphInfo struct {
	ID   string
	Name string
	// Total counts the nodes; the others count them by state. Total =
	// Waiting + Pending + Done + Failed + Cancelled.
	Total, Waiting, Pending, Done, Failed, Cancelled int
	CreatedAt                                        time.Time
	// CancelledAt is when the graph was cancelled (CancelGraph), zero if
	// it was not or has been retried since.
	CancelledAt time.Time
}

// Finished reports whether no node is waiting or pending.
func (g GraphInfo) Finished() bool { return g.Total > 0 && g.Waiting+g.Pending == 0 }

// Succeeded reports whether every node is done.
func (g GraphInfo) Succeeded() bool { return g.Total > 0 && g.Done == g.Total }

// Count adds d to the counter of state s.
func (g *GraphInfo) Count(s NodeState, d int) {
	switch s {
	case NodeWaiting:
		g.Waiting += d
	case NodePending:
		g.Pending += d
	case NodeDone:
		g.Done += d
	case NodeFailed:
		g.Failed += d
	case NodeCancelled:
		g.Cancelled += d
	}
}

// GraphNodeInfo is a node as the store has it.
type GraphNodeInfo struct {
	Name        string
	JobID       string
	State       NodeState
	After       []string
	AllowFailed bool
}

// GraphPage is one page of graphs, newest first; Next continues it ("" at
// the end).
type GraphPage struct {
	Graphs []GraphInfo
	Next   string
}

// GraphDispatcher stores a graph in one step: all or nothing. Every store
// with Graphs is one; so is sqlqueue's TxPusher, which stores it in the
// caller's transaction.
type GraphDispatcher interface {
	// PushGraph stores rec and nodes (checked by ValidateGraph) and pushes
	// the jobs of the nodes without dependencies, which become pending;
	// the others wait. It returns an error matching ErrDuplicate, storing
	// nothing, when a graph with rec.ID exists or a root's job ID is held
	// by an active job.
	PushGraph(ctx context.Context, rec GraphRecord, nodes []GraphNode) error
}

// Graphs is a store that keeps graphs of jobs (see package dag): the
// nodes, their dependencies and where each stands. A node's outcome
// reaches its graph through Complete (Completion.Graph), in the same
// transaction as the job's change, by the rules of NodeTransition:
//
//   - a node that succeeds is done; each waiting dependant whose
//     dependencies have then all succeeded (or failed, for an AllowFailed
//     dependant) becomes pending, its job pushed;
//   - a node dead-lettered is failed; its waiting dependants are
//     cancelled, and theirs, unless a dependant has AllowFailed, when the
//     failure counts for it as a success;
//   - a node cancelled (Controller.Cancel, a handler's Cancel, or
//     CancelGraph) cancels its waiting dependants, and theirs.
//
// A node moves only by NodeTransition, so a second recording of an
// outcome (a duplicate run, a lease lost) changes nothing.
type Graphs interface {
	GraphDispatcher
	// CancelGraph marks graph id cancelled and cancels every node not
	// finished: waiting nodes at once, pending nodes' jobs as
	// Controller.Cancel does. Cancelling a finished graph changes nothing.
	// It returns the graph as it is afterwards, or ErrNotFound.
	CancelGraph(ctx context.Context, id string) (GraphInfo, error)
	// RetryGraph runs graph id's failed nodes again: each failed node's
	// dead letter goes back to ready (or its job is pushed anew when the
	// dead letter is gone) and the node is pending; each cancelled node
	// whose job never ran waits again for its dependencies, and runs when
	// they succeed; the graph is no longer cancelled. A node whose job was
	// cancelled stays cancelled, and so do its dependants. It returns how
	// many failed nodes it retried, or ErrNotFound.
	RetryGraph(ctx context.Context, id string) (int, error)
	// GetGraph reads graph id and its nodes (in the order they were
	// dispatched, at most MaxGraphNodes), or returns ErrNotFound.
	GetGraph(ctx context.Context, id string) (GraphInfo, []GraphNodeInfo, error)
	// GraphNode reads the node name of graph id, or returns ErrNotFound.
	GraphNode(ctx context.Context, id, name string) (GraphNodeInfo, error)
	// ListGraphs pages through the graphs, newest first (f.Limit as
	// BatchLimit).
	ListGraphs(ctx context.Context, f BatchFilter) (GraphPage, error)
}

// NodeTransition is where a node in state from goes when its job ends with
// outcome o, and whether it moves at all: a pending node becomes done,
// failed or cancelled; a failed node whose dead letter was retried by hand
// (RetryDead) becomes done when it succeeds, changing no other node (its
// dependants were settled by its failure); nothing else moves. Every store
// with Graphs applies this rule.
func NodeTransition(from NodeState, o Outcome) (NodeState, bool) {
	switch {
	case o == OutcomeDone && (from == NodePending || from == NodeFailed):
		return NodeDone, true
	case o == OutcomeFailed && from == NodePending:
		return NodeFailed, true
	case o == OutcomeCancelled && from == NodePending:
		return NodeCancelled, true
	}
	return from, false
}

// ValidateGraph checks a graph as PushGraph takes it, with the same rules
// on every store, and returns an error matching ErrGraph (or ErrInvalid,
// for a job beyond Validate's limits), or nil: 1 to MaxGraphNodes nodes,
// names of 1 to MaxGraphNodeName bytes of UTF-8 without NUL, unique; each
// After entry names a node before it, once; at most MaxGraphEdges in all;
// each job valid, with an ID of its own, no unique key, no batch, no
// chain, and MetaGraphNode equal to its node's name.
func ValidateGraph(rec GraphRecord, nodes []GraphNode) error {
	if len(rec.Name) > MaxGraphName {
		return fmt.Errorf("%w: name of %d bytes, over %d", ErrGraph, len(rec.Name), MaxGraphName)
	}
	if len(nodes) == 0 || len(nodes) > MaxGraphNodes {
		return fmt.Errorf("%w: %d nodes, want 1 to %d", ErrGraph, len(nodes), MaxGraphNodes)
	}
	seen := make(map[string]bool, len(nodes))
	ids := make(map[string]bool, len(nodes))
	edges := 0
	for i, n := range nodes {
		if n.Name == "" || len(n.Name) > MaxGraphNodeName || !utf8.ValidString(n.Name) || strings.IndexByte(n.Name, 0) >= 0 {
			return fmt.Errorf("%w: node %d's name %q: want 1 to %d bytes of UTF-8 without NUL", ErrGraph, i+1, n.Name, MaxGraphNodeName)
		}
		if seen[n.Name] {
			return fmt.Errorf("%w: node name %q is used twice", ErrGraph, n.Name)
		}
		deps := make(map[string]bool, len(n.After))
		for _, d := range n.After {
			switch {
			case d == n.Name:
				return fmt.Errorf("%w: node %q depends on itself", ErrGraph, n.Name)
			case !seen[d]:
				return fmt.Errorf("%w: node %q depends on %q, which is not added before it", ErrGraph, n.Name, d)
			case deps[d]:
				return fmt.Errorf("%w: node %q names %q twice", ErrGraph, n.Name, d)
			}
			deps[d] = true
		}
		edges += len(n.After)
		seen[n.Name] = true
		j := n.Job
		switch {
		case j.ID == "":
			return fmt.Errorf("%w: node %q's job has no ID", ErrGraph, n.Name)
		case ids[j.ID]:
			return fmt.Errorf("%w: node %q repeats job ID %s", ErrGraph, n.Name, j.ID)
		case j.Name == "":
			return fmt.Errorf("%w: node %q's job has no name (build it with queue.NewJob)", ErrGraph, n.Name)
		case j.UniqueKey != "":
			return fmt.Errorf("%w: node %q's job has a unique key; nodes may not", ErrGraph, n.Name)
		case j.Meta[MetaBatch] != "":
			return fmt.Errorf("%w: node %q's job is a batch member; nodes may not be", ErrGraph, n.Name)
		case j.Meta["meridian.chain"] != "":
			return fmt.Errorf("%w: node %q's job is a chain; nodes may not be", ErrGraph, n.Name)
		case j.Meta[MetaGraph] != rec.ID || j.Meta[MetaGraphNode] != n.Name:
			return fmt.Errorf("%w: node %q's job does not carry its graph and node name", ErrGraph, n.Name)
		}
		ids[j.ID] = true
		if err := Validate(j); err != nil {
			return fmt.Errorf("%w: node %q: %w", ErrGraph, n.Name, err)
		}
	}
	if edges > MaxGraphEdges {
		return fmt.Errorf("%w: %d dependencies, over %d", ErrGraph, edges, MaxGraphEdges)
	}
	return nil
}

// EncodeNodeJob returns the text a store keeps for a waiting node's job,
// read back by DecodeNodeJob.
func EncodeNodeJob(j Job) (string, error) {
	b, err := json.Marshal(stepOf(j))
	if err != nil {
		return "", fmt.Errorf("%w: encoding node job %s: %v", ErrGraph, j.ID, err)
	}
	return string(b), nil
}

// DecodeNodeJob reads a job EncodeNodeJob encoded.
func DecodeNodeJob(s string) (Job, error) {
	var st step
	if err := json.Unmarshal([]byte(s), &st); err != nil {
		return Job{}, fmt.Errorf("%w: unreadable node job: %v", ErrGraph, err)
	}
	return st.job(), nil
}

// EncodeAfter and DecodeAfter carry a node's After list as one text
// column.
func EncodeAfter(after []string) string {
	if len(after) == 0 {
		return ""
	}
	b, _ := json.Marshal(after)
	return string(b)
}

// DecodeAfter reads a list EncodeAfter encoded ("" is none).
func DecodeAfter(s string) []string {
	if s == "" {
		return nil
	}
	var out []string
	_ = json.Unmarshal([]byte(s), &out)
	return out
}
