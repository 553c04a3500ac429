package dashboard

import (
	"context"
	"fmt"
	"net/http"
	"net/url"

	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// The Graphs page and a graph's page (package dag).

// GraphSource is a Source that also serves graphs of jobs (package dag):
// the Graphs page and a graph's page, drawn as an SVG of its nodes, each
// in its state, and their dependencies, with cancel and retry. The handler
// offers them when the Source is a GraphSource and its Abilities().Graphs
// is set. ForQueue's Source is one; its graphs work when its driver has
// driver.Graphs.
type GraphSource interface {
	// ListGraphs pages through the graphs, newest first.
	ListGraphs(ctx context.Context, f driver.BatchFilter) (driver.GraphPage, error)
	// GetGraph reads one graph and its nodes, or fails with an error
	// wrapping ErrNotFound.
	GetGraph(ctx context.Context, id string) (driver.GraphInfo, []driver.GraphNodeInfo, error)
	// CancelGraph cancels a graph's nodes not yet finished.
	CancelGraph(ctx context.Context, id string) (driver.GraphInfo, error)
	// RetryGraph runs a graph's failed nodes again and reports how many.
	RetryGraph(ctx context.Context, id string) (int, error)
}

// grapher returns the driver's Graphs, or an error wrapping
// queue.ErrUnsupported.
func (qi *QueueInspector) grapher(doing string) (driver.Graphs, error) {
	if qi.graphs == nil {
		return nil, fmt.Errorf("dashboard: %s: %w", doing, queue.ErrUnsupported)
	}
	return qi.graphs, nil
}

// ListGraphs lists the driver's graphs (see GraphSource).
func (qi *QueueInspector) ListGraphs(ctx context.Context, f driver.BatchFilter) (driver.GraphPage, error) {
	g, err := qi.grapher("listing graphs")
	if err != nil {
		return driver.GraphPage{}, err
	}
	return g.ListGraphs(ctx, f)
}

// GetGraph reads one of the driver's graphs (see GraphSource).
func (qi *QueueInspector) GetGraph(ctx context.Context, id string) (driver.GraphInfo, []driver.GraphNodeInfo, error) {
	g, err := qi.grapher("reading a graph")
	if err != nil {
		return driver.GraphInfo{}, nil, err
	}
	return g.GetGraph(ctx, id)
}

// CancelGraph cancels a graph (see GraphSource).
func (qi *QueueInspector) CancelGraph(ctx context.Context, id string) (driver.GraphInfo, error) {
	g, err := qi.grapher("cancelling a graph")
	if err != nil {
		return driver.GraphInfo{}, err
	}
	return g.CancelGraph(ctx, id)
}

// RetryGraph retries a graph's failed nodes (see GraphSource).
func (qi *QueueInspector) RetryGraph(ctx context.Context, id string) (int, error) {
	g, err := qi.grapher("retrying a graph")
	if err != nil {
		return 0, err
	}
	return g.RetryGraph(ctx, id)
}

// graphsOf returns the handler's GraphSource, or nil when it serves no
// graphs.
func (h *handler) graphsOf() GraphSource {
	gs, ok := h.src.(GraphSource)
	if !ok || !h.src.Abilities().Graphs {
		return nil
	}
	return gs
}

// graphRow is one graph on the Graphs page or at the head of its own.
type graphRow struct {
	driver.GraphInfo
	URL    string
	Bar    batchBar
	Status string // running, succeeded, finished, cancelled
	// Progress is the share of nodes finished, 0 to 100.
	Progress int
}

func (h *handler) graphRow(r *http.Request, g driver.GraphInfo) graphRow {
	st := "running"
	switch {
	case !g.CancelledAt.IsZero():
		st = "cancelled"
	case g.Succeeded():
		st = "succeeded"
	case g.Finished():
		st = "finished"
	}
	row := graphRow{GraphInfo: g, URL: relBase(r) + "graphs/" + url.PathEscape(g.ID), Status: st,
		Bar: barOf(driver.BatchInfo{Total: g.Total, Done: g.Done, Failed: g.Failed, Cancelled: g.Cancelled})}
	if g.Total > 0 {
		row.Progress = (g.Done + g.Failed + g.Cancelled) * 100 / g.Total
	}
	return row
}

type graphsData struct {
	Rows []graphRow
	pager
}

// graphsPage lists the graphs, newest first, a page at a time.
func (h *handler) graphsPage(w http.ResponseWriter, r *http.Request) {
	gs := h.graphsOf()
	if gs == nil {
		h.failErr(w, r, "The graphs page", queue.ErrUnsupported)
		return
	}
	ref := readPageRef(r.URL.Query())
	page, err := gs.ListGraphs(r.Context(), driver.BatchFilter{Limit: PageSize, After: ref.After})
	if err != nil {
		h.failErr(w, r, "Listing the graphs", err)
		return
	}
	var d graphsData
	for _, g := range page.Graphs {
		d.Rows = append(d.Rows, h.graphRow(r, g))
	}
	d.pager = keysetPager("graphs", url.Values{}, ref, page.Next)
	h.render(w, r, http.StatusOK, "graphs", h.newPage(w, r, "Graphs", "graphs", d))
}

// maxDrawnNodes is the most nodes a graph's page draws; a larger graph is
// shown as its table only.
const maxDrawnNodes = 400

// The drawing's grid: a column per depth (the longest path from a root),
// a row per node in its column.
const (
	nodeW, nodeH = 120, 28
	colGap       = 60
	rowGap       = 14
	pad          = 10
)

// drawnNode is a node placed in the drawing.
type drawnNode struct {
	driver.GraphNodeInfo
	X, Y  int
	Label string // the name, cut to fit the box
	URL   string // the job's page, "" without job detail
}

// drawnEdge is a dependency: a line from the dependency's right side to
// the dependant's left.
type drawnEdge struct {
	X1, Y1, X2, Y2 int
	Class          string // the dependency's state, for the line's colour
}

// drawing is the SVG of a graph.
type drawing struct {
	W, H  int
	Nodes []drawnNode
	Edges []drawnEdge
}

// draw lays nodes out by depth: each node goes one column right of its
// deepest dependency (nodes list dependencies before dependants).
func draw(nodes []driver.GraphNodeInfo, jobURL func(string) string) drawing {
	depth := make(map[string]int, len(nodes))
	rows := map[int]int{}
	at := make(map[string]*drawnNode, len(nodes))
	var d drawing
	d.Nodes = make([]drawnNode, len(nodes))
	for i, n := range nodes {
		c := 0
		for _, a := range n.After {
			c = max(c, depth[a]+1)
		}
		depth[n.Name] = c
		r := rows[c]
		rows[c]++
		label := n.Name
		if len(label) > 16 {
			label = label[:15] + "…"
		}
		d.Nodes[i] = drawnNode{GraphNodeInfo: n, X: pad + c*(nodeW+colGap), Y: pad + r*(nodeH+rowGap), Label: label, URL: jobURL(n.JobID)}
		at[n.Name] = &d.Nodes[i]
		d.W = max(d.W, d.Nodes[i].X+nodeW+pad)
		d.H = max(d.H, d.Nodes[i].Y+nodeH+pad)
	}
	for _, n := range d.Nodes {
		for _, a := range n.After {
			from := at[a]
			if from == nil {
				continue
			}
			d.Edges = append(d.Edges, drawnEdge{X1: from.X + nodeW, Y1: from.Y + nodeH/2, X2: n.X, Y2: n.Y + nodeH/2, Class: string(from.State)})
		}
	}
	return d
}

type graphData struct {
	Graph     graphRow
	Drawing   *drawing // nil beyond maxDrawnNodes
	Nodes     []drawnNode
	CancelURL string // "" when the graph has finished
	RetryURL  string // "" when no node failed
}

// graphPage shows one graph: its progress, its actions, its drawing and
// its nodes.
func (h *handler) graphPage(w http.ResponseWriter, r *http.Request) {
	gs := h.graphsOf()
	if gs == nil {
		h.failErr(w, r, "The graph page", queue.ErrUnsupported)
		return
	}
	id := r.PathValue("id")
	g, nodes, err := gs.GetGraph(r.Context(), id)
	if err != nil {
		h.failErr(w, r, "Reading the graph", err)
		return
	}
	detail := h.src.Abilities().Detail
	jobURL := func(jid string) string {
		if !detail {
			return ""
		}
		return "../jobs/" + url.PathEscape(jid)
	}
	dr := draw(nodes, jobURL)
	d := graphData{Graph: h.graphRow(r, g), Nodes: dr.Nodes}
	if len(nodes) <= maxDrawnNodes {
		d.Drawing = &dr
	}
	self := url.PathEscape(id)
	if !g.Finished() {
		d.CancelURL = self + "/cancel"
	}
	if g.Failed > 0 {
		d.RetryURL = self + "/retry"
	}
	title := "Graph " + shortID(g.ID)
	if g.Name != "" {
		title = "Graph " + g.Name
	}
	h.render(w, r, http.StatusOK, "graph", h.newPage(w, r, title, "graphs", d))
}

// cancelGraph cancels a graph and goes back to its page with the number
// of nodes the cancel stopped.
func (h *handler) cancelGraph(w http.ResponseWriter, r *http.Request) {
	gs := h.graphsOf()
	if gs == nil {
		h.failErr(w, r, "Cancelling the graph", queue.ErrUnsupported)
		return
	}
	id := r.PathValue("id")
	before, _, err := gs.GetGraph(r.Context(), id)
	if err == nil {
		var after driver.GraphInfo
		if after, err = gs.CancelGraph(r.Context(), id); err == nil {
			back(w, r, "graphs/"+url.PathEscape(id), "cancelled", after.Cancelled-before.Cancelled, false)
			return
		}
	}
	h.failErr(w, r, "Cancelling the graph", err)
}

// retryGraph retries a graph's failed nodes.
func (h *handler) retryGraph(w http.ResponseWriter, r *http.Request) {
	gs := h.graphsOf()
	if gs == nil {
		h.failErr(w, r, "Retrying the graph's failed nodes", queue.ErrUnsupported)
		return
	}
	id := r.PathValue("id")
	n, err := gs.RetryGraph(r.Context(), id)
	if err != nil {
		h.failErr(w, r, "Retrying the graph's failed nodes", err)
		return
	}
	flash := "retried"
	if n == 0 {
		flash = "none"
	}
	back(w, r, "graphs/"+url.PathEscape(id), flash, n, false)
}

// graphRoutes adds the graphs pages and actions to m.
func (h *handler) graphRoutes(m *router) {
	m.HandleFunc("GET /queues/graphs", h.graphsPage)
	m.HandleFunc("GET /queues/graphs/{id}", h.graphPage)
	m.HandleFunc("POST /queues/graphs/{id}/cancel", h.cancelGraph)
	m.HandleFunc("POST /queues/graphs/{id}/retry", h.retryGraph)
}
