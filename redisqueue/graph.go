package redisqueue

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// graphRetention is how long a finished graph's keys are kept: GetGraph
// answers ErrNotFound after it.
const graphRetention = batchRetention

// graphBuildKeep is how long the keys of a graph whose PushGraph stopped
// before the graph went live are kept.
const graphBuildKeep = time.Hour

// graphMark is the first field of a graph node's event in an outbox (a
// batch's ID is never it: it starts with NUL).
const graphMark = "\x00graph"

var _ driver.Graphs = (*Queue)(nil)

// graphBase returns the hash-tagged base of graph id's keys:
// {prefix:%G:id}, id escaped as a queue name is.
func (q *Queue) graphBase(id string) string {
	b := q.base(id)
	return "{" + q.prefix + ":%G:" + b[len(q.prefix)+2:]
}

// graphKeys are every key of the graph whose base is gb (graphSide's GK).
func graphKeys(gb string) []string {
	var out []string
	for _, s := range []string{"", ":st", ":wt", ":jid", ":ix", ":q", ":af", ":aft", ":dp", ":jb", ":pu", ":rk", ":rd", ":rl", ":cq", ":ord"} {
		out = append(out, gb+s)
	}
	return out
}

// graphFields are the record's fields GraphInfo is read from.
var graphFields = []string{"id", "nm", "cr", "ca", "tot", "wai", "pen", "don", "fai", "can", "bld"}

// decodeGraph reads the values of graphFields; ok is false for an
// unknown graph or one still building.
func decodeGraph(v []any) (driver.GraphInfo, bool) {
	if len(v) != len(graphFields) || v[0] == nil || v[10] != nil {
		return driver.GraphInfo{}, false
	}
	s := func(i int) string { x, _ := v[i].(string); return x }
	n := func(i int) int { x, _ := strconv.Atoi(s(i)); return x }
	t := func(i int) time.Time {
		if s(i) == "" {
			return time.Time{}
		}
		ms, _ := strconv.ParseInt(s(i), 10, 64)
		return time.UnixMilli(ms)
	}
	return driver.GraphInfo{ID: s(0), Name: s(1), CreatedAt: t(2), CancelledAt: t(3),
		Total: n(4), Waiting: n(5), Pending: n(6), Done: n(7), Failed: n(8), Cancelled: n(9)}, true
}

// PushGraph stores rec and nodes and pushes the roots' jobs (see
// driver.GraphDispatcher), in steps: the nodes written in chunks under a
// record marked building (invisible, and expiring, until it goes live);
// the graph's index entry; a follow event in the first root's queue's
// outbox; the graph live, its roots pending on its push list; the roots
// pushed (step 3 of scripts_graph.go); the event deleted. A process
// killed after the follow event leaves it for the next reservation from
// that queue, which pushes the roots; one killed before leaves a building
// graph that expires.
func (q *Queue) PushGraph(ctx context.Context, rec driver.GraphRecord, nodes []driver.GraphNode) error {
	doing := "pushing graph " + rec.ID
	if err := ctxErr(ctx, doing); err != nil {
		return err
	}
	if err := driver.ValidateGraph(rec, nodes); err != nil {
		return err
	}
	if rec.ID == "" {
		return fmt.Errorf("redisqueue: %s: %w: a graph needs an ID", doing, driver.ErrGraph)
	}
	dependants := map[string][]string{}
	var roots []queue.Job
	for _, n := range nodes {
		for _, d := range n.After {
			dependants[d] = append(dependants[d], n.Name)
		}
		if len(n.After) == 0 {
			roots = append(roots, n.Job)
		}
	}
	if held, err := q.activeID(ctx, roots); err != nil {
		return wrap(doing, err)
	} else if held != "" {
		return fmt.Errorf("redisqueue: %s: %w", doing, &driver.DuplicateError{ExistingID: held})
	}
	gb := q.graphBase(rec.ID)
	first := true
	for chunk := range slices.Chunk(nodes, memberChunk) {
		f := "0"
		if first {
			f = "1"
		}
		args := []any{f, graphBuildKeep.Milliseconds(), rec.ID, rec.Name}
		for _, n := range chunk {
			jb, err := driver.EncodeNodeJob(n.Job)
			if err != nil {
				q.undoGraph(ctx, rec.ID)
				return err
			}
			af, root := "0", "0"
			if n.AllowFailed {
				af = "1"
			}
			if len(n.After) == 0 {
				root = "1"
			}
			args = append(args, n.Name, n.Job.ID, n.Job.QueueName(), af, strings.Join(n.After, "\x00"),
				strings.Join(dependants[n.Name], "\x00"), jb, len(n.After), root)
		}
		ok, err := createGraphScript.Run(ctx, q.rdb, []string{gb}, args...).Int()
		if err != nil {
			q.undoGraph(ctx, rec.ID)
			return wrap(doing, err)
		}
		if ok == 0 {
			if first {
				return fmt.Errorf("redisqueue: %s: %w", doing, &driver.DuplicateError{ExistingID: rec.ID})
			}
			return fmt.Errorf("redisqueue: %s: the graph was taken away while it was written", doing)
		}
		first = false
	}
	if err := q.batchSweep.step("graph-written"); err != nil {
		return err
	}
	if err := indexGraphScript.Run(ctx, q.rdb, []string{q.gindex, q.gseq}, rec.ID).Err(); err != nil {
		q.undoGraph(ctx, rec.ID)
		return wrap(doing, err)
	}
	rq := roots[0].QueueName()
	seq, err := noteGraphScript.Run(ctx, q.rdb, []string{q.base(rq)}, rec.ID).Int64()
	field := strconv.FormatInt(seq, 10)
	if err != nil {
		q.undoGraph(ctx, rec.ID)
		return wrap(doing, err)
	}
	if err := q.register(ctx, rq); err != nil {
		return wrap(doing, err)
	}
	if err := q.batchSweep.step("graph-noted"); err != nil {
		return err
	}
	// Should this fail, the event stays: a later reservation from the
	// root's queue drops it once the building graph has expired.
	live, err := liveGraphScript.Run(ctx, q.rdb, []string{gb}, len(nodes), len(roots)).Int()
	if err != nil {
		return wrap(doing, err)
	}
	if live == 0 {
		return fmt.Errorf("redisqueue: %s: the graph expired before it went live (its dispatch took over %s)", doing, graphBuildKeep)
	}
	if err := q.batchSweep.step("graph-live"); err != nil {
		return err
	}
	// From here the graph stands: should a step fail, the event left in
	// the outbox has a later reservation finish it.
	if err := q.followGraph(ctx, rec.ID, false); err != nil {
		q.log.Warn("redisqueue: a graph's roots left for a later reservation", "graph", rec.ID, "err", err)
		return nil
	}
	if err := q.rdb.HDel(ctx, q.base(rq)+":bout", field).Err(); err != nil {
		q.log.Warn("redisqueue: a graph's follow event left for a later reservation", "graph", rec.ID, "err", err)
	}
	return nil
}

// activeID returns the ID of the first of jobs that an active job holds
// in its queue, or "".
func (q *Queue) activeID(ctx context.Context, jobs []queue.Job) (string, error) {
	pipe := q.rdb.Pipeline()
	cmds := make([]*redis.StringCmd, len(jobs))
	for i, j := range jobs {
		cmds[i] = pipe.HGet(ctx, q.idsKey(q.base(j.QueueName())), j.ID)
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return "", err
	}
	pipe = q.rdb.Pipeline()
	sts := make([]*redis.StringCmd, len(jobs))
	for i, j := range jobs {
		if b := cmds[i].Val(); b != "" {
			sts[i] = pipe.HGet(ctx, b+":j:"+j.ID, "st")
		}
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return "", err
	}
	for i, j := range jobs {
		if sts[i] != nil && sts[i].Val() != "" && sts[i].Val() != "d" {
			return j.ID, nil
		}
	}
	return "", nil
}

// undoGraph deletes a graph whose dispatch failed before it went live,
// and its index entry, under a context of its own.
func (q *Queue) undoGraph(ctx context.Context, id string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	gb := q.graphBase(id)
	if bld, _ := q.rdb.HGet(ctx, gb, "bld").Result(); bld != "1" {
		return
	}
	err := q.rdb.Del(ctx, graphKeys(gb)...).Err()
	err = errors.Join(err, q.rdb.ZRem(ctx, q.gindex, id).Err())
	if err != nil {
		q.log.Warn("redisqueue: taking back a graph whose dispatch failed", "graph", id, "err", err)
	}
}

// nodeEvent is a graph node's event of a queue's outbox: the node whose
// job is job ended with outcome ("0" done, "2" failed, "3" cancelled, or
// "f" for follow only); keep is how long its result is kept once the
// graph has finished.
type nodeEvent struct {
	field                     string
	seq                       int64
	graph, job, outcome, keep string
}

// applyNodeEvents applies es, events of graph gid from the outbox of
// queue name, in one script of the graph's slot (step 2), does what the
// graph then has to do (step 3), releases the results no graph keeps,
// and deletes the events (step 4). Events of a graph still being
// dispatched stay.
func (q *Queue) applyNodeEvents(ctx context.Context, name, gid string, es []nodeEvent, inCancel bool) error {
	args := []any{q.batchSweep.graphKeep.Milliseconds(), memberChunk}
	fields := make([]string, len(es))
	for i, e := range es {
		args = append(args, e.job, e.outcome, e.keep)
		fields[i] = e.field
	}
	v, err := applyGraphScript.Run(ctx, q.rdb, []string{q.graphBase(gid)}, args...).Slice()
	if err != nil {
		return err
	}
	if err := q.batchSweep.step("node-applied"); err != nil {
		return err
	}
	var release []nodeEvent
	switch code, _ := v[0].(int64); code {
	case 2:
		return nil
	case 0: // an unknown graph: its events are dropped, their results released
		for _, e := range es {
			if e.keep != "" {
				release = append(release, e)
			}
		}
	default:
		for _, x := range v[1:] {
			if k, _ := x.(int64); k >= 1 && int(k) <= len(es) {
				release = append(release, es[k-1])
			}
		}
		if err := q.followGraph(ctx, gid, inCancel); err != nil {
			return err
		}
	}
	for _, e := range release {
		if err := q.releaseResult(ctx, name, e.job, e.keep); err != nil {
			return err
		}
	}
	return q.rdb.HDel(ctx, q.base(name)+":bout", fields...).Err()
}

// releaseResult starts the retention (keep ms) of job id's result in
// queue name, kept until then without expiry.
func (q *Queue) releaseResult(ctx context.Context, name, id, keep string) error {
	ms, err := strconv.ParseInt(keep, 10, 64)
	if err != nil || ms <= 0 {
		ms = 1
	}
	return q.rdb.PExpire(ctx, q.base(name)+":r:"+id, time.Duration(ms)*time.Millisecond).Err()
}

// followGraph does what graph gid has to do (step 3): cancel the nodes
// on its cascade list, push each entry of its push list once, release
// the results of a finished graph, and cancel its pending nodes if it
// was cancelled (unless inCancel: the caller is doing it).
func (q *Queue) followGraph(ctx context.Context, gid string, inCancel bool) error {
	gb := q.graphBase(gid)
	for {
		v, err := graphDueScript.Run(ctx, q.rdb, []string{gb}, memberChunk).Slice()
		if err != nil {
			return err
		}
		if code, _ := v[0].(int64); code != 1 || len(v) != 6 {
			return nil
		}
		cancelled, _ := v[1].(string)
		pending, _ := v[2].(int64)
		if cq, _ := v[3].(int64); cq > 0 {
			if err := applyGraphScript.Run(ctx, q.rdb, []string{gb}, q.batchSweep.graphKeep.Milliseconds(), memberChunk).Err(); err != nil {
				return err
			}
			continue
		}
		rd, _ := v[4].([]any)
		rl, _ := v[5].([]any)
		str := func(x any) string { s, _ := x.(string); return s }
		if err := q.pushNodes(ctx, gb, gid, rd); err != nil {
			return err
		}
		for i := 0; i+2 < len(rl); i += 3 {
			entry := str(rl[i])
			keep, _, _ := strings.Cut(entry, ":")
			if err := q.releaseResult(ctx, str(rl[i+2]), str(rl[i+1]), keep); err != nil {
				return err
			}
			if err := q.rdb.LRem(ctx, gb+":rl", 1, entry).Err(); err != nil {
				return err
			}
		}
		if len(rd) < 4*memberChunk && len(rl) < 3*memberChunk {
			if !inCancel && cancelled != "" && pending > 0 {
				return q.cancelNodes(ctx, gid)
			}
			return nil
		}
	}
}

// pushNodes pushes the jobs of graph gid's push entries rd (entry, job
// ID, queue, job, as graphDueScript returns them), each once whatever the
// retries: one pushNodesScript per queue, then the entries taken off the
// push list.
func (q *Queue) pushNodes(ctx context.Context, gb, gid string, rd []any) error {
	str := func(x any) string { s, _ := x.(string); return s }
	type push struct {
		entry string
		job   queue.Job
	}
	var names []string
	byQueue := map[string][]push{}
	var entries []any
	for i := 0; i+3 < len(rd); i += 4 {
		entry := str(rd[i])
		entries = append(entries, entry)
		j, err := driver.DecodeNodeJob(str(rd[i+3]))
		if err != nil {
			// A node job that cannot be read (a record corrupted by hand)
			// cannot be pushed by any retry.
			q.log.Warn("redisqueue: a graph node's job that cannot be read dropped", "graph", gid, "node", entry, "err", err)
			continue
		}
		n := j.QueueName()
		if byQueue[n] == nil {
			names = append(names, n)
		}
		byQueue[n] = append(byQueue[n], push{entry, j})
	}
	for _, n := range names {
		if err := q.register(ctx, n); err != nil {
			return err
		}
		b := q.base(n)
		ks := newKeyset(q.idsKey(b), q.qsetKey(b))
		args := []any{q.wake, guardRetention.Milliseconds()}
		for _, p := range byQueue[n] {
			var err error
			if args, err = q.pushArgs(append(args, gid+":"+p.entry), ks, &p.job); err != nil {
				return err
			}
		}
		if err := pushNodesScript.Run(ctx, q.rdb, ks.keys, args...).Err(); err != nil {
			return err
		}
	}
	if err := q.batchSweep.step("node-pushed"); err != nil {
		return err
	}
	if len(entries) == 0 {
		return nil
	}
	pipe := q.rdb.Pipeline()
	for _, e := range entries {
		pipe.LRem(ctx, gb+":rd", 1, e)
	}
	_, err := pipe.Exec(ctx)
	return err
}

// cancelNodes cancels the pending nodes of the cancelled graph gid: each
// queue's nodes in one script of the queue's slot (step 1), then that
// queue's outbox settled. It stops when a round notes none (a node
// whose job is dead, or has ended, is left to its own event).
func (q *Queue) cancelNodes(ctx context.Context, gid string) error {
	gb := q.graphBase(gid)
	for {
		trip, err := pendingNodesScript.Run(ctx, q.rdb, []string{gb}).StringSlice()
		if err != nil || len(trip) == 0 {
			return err
		}
		byQueue := map[string][]any{}
		var names []string
		for i := 0; i+2 < len(trip); i += 3 {
			n := trip[i+1]
			if byQueue[n] == nil {
				names = append(names, n)
			}
			byQueue[n] = append(byQueue[n], trip[i], gid+":"+trip[i+2])
		}
		noted := 0
		for _, n := range names {
			b := q.base(n)
			for pairs := range slices.Chunk(byQueue[n], 2*memberChunk) {
				args := append([]any{gid, time.Now().UnixMilli(), cancelKeep.Milliseconds(), cancelLogCap, guardRetention.Milliseconds(), q.wake}, pairs...)
				k, err := cancelNodesScript.Run(ctx, q.rdb, []string{q.idsKey(b), b, q.clogKey(b)}, args...).Int()
				if err != nil {
					return err
				}
				noted += k
			}
		}
		if err := q.batchSweep.step("nodes-cancelled"); err != nil {
			return err
		}
		for _, n := range names {
			if err := q.settleQueue(ctx, n, gb); err != nil {
				return err
			}
		}
		if noted == 0 {
			return nil
		}
	}
}

// CancelGraph cancels graph id (see driver.Graphs): a follow event in a
// node's queue's outbox first, then the graph and its waiting nodes
// marked cancelled in its slot, then its pending nodes cancelled queue by
// queue, each counted in the graph through its queue's outbox, and the
// event deleted. A call cut short is finished by the next reservation
// from that queue, or by calling it again.
func (q *Queue) CancelGraph(ctx context.Context, id string) (driver.GraphInfo, error) {
	doing := "cancelling graph " + id
	if err := ctxErr(ctx, doing); err != nil {
		return driver.GraphInfo{}, err
	}
	if id == "" {
		return driver.GraphInfo{}, fmt.Errorf("redisqueue: %s: %w", doing, queue.ErrNotFound)
	}
	outbox, field, err := q.noteFollow(ctx, id)
	if err != nil {
		return driver.GraphInfo{}, fmt.Errorf("redisqueue: %s: %w", doing, err)
	}
	ok, err := cancelGraphScript.Run(ctx, q.rdb, []string{q.graphBase(id)}, q.batchSweep.graphKeep.Milliseconds()).Int()
	if err != nil {
		return driver.GraphInfo{}, wrap(doing, err)
	}
	if ok == 0 {
		q.rdb.HDel(ctx, outbox, field)
		return driver.GraphInfo{}, fmt.Errorf("redisqueue: %s: %w", doing, queue.ErrNotFound)
	}
	if err := q.batchSweep.step("graph-cancel-marked"); err != nil {
		return driver.GraphInfo{}, err
	}
	if err := q.followGraph(ctx, id, false); err != nil {
		return driver.GraphInfo{}, wrap(doing, err)
	}
	if err := q.rdb.HDel(ctx, outbox, field).Err(); err != nil {
		return driver.GraphInfo{}, wrap(doing, err)
	}
	info, _, err := q.graph(ctx, id, false)
	return info, wrap(doing, err)
}

// RetryGraph runs graph id's failed nodes again (see driver.Graphs): a
// follow event in a node's queue's outbox first, then one script of the
// graph's slot, the done nodes' results kept again without expiry, the
// graph followed (its push list pushed: a failed node's dead letter goes
// back to ready) and the event deleted.
func (q *Queue) RetryGraph(ctx context.Context, id string) (int, error) {
	doing := "retrying graph " + id
	if err := ctxErr(ctx, doing); err != nil {
		return 0, err
	}
	if id == "" {
		return 0, fmt.Errorf("redisqueue: %s: %w", doing, queue.ErrNotFound)
	}
	gb := q.graphBase(id)
	outbox, field, err := q.noteFollow(ctx, id)
	if err != nil {
		return 0, fmt.Errorf("redisqueue: %s: %w", doing, err)
	}
	out, err := retryGraphScript.Run(ctx, q.rdb, []string{gb}, q.batchSweep.graphKeep.Milliseconds(), memberChunk).Slice()
	if err != nil {
		return 0, wrap(doing, err)
	}
	n, _ := out[0].(int64)
	if n < 0 {
		q.rdb.HDel(ctx, outbox, field)
		return 0, fmt.Errorf("redisqueue: %s: %w", doing, queue.ErrNotFound)
	}
	if err := q.batchSweep.step("graph-retried"); err != nil {
		return 0, err
	}
	if len(out) > 1 {
		pipe := q.rdb.Pipeline()
		for i := 1; i+1 < len(out); i += 2 {
			jid, _ := out[i].(string)
			qn, _ := out[i+1].(string)
			pipe.Persist(ctx, q.base(qn)+":r:"+jid)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return 0, wrap(doing, err)
		}
	}
	if err := q.followGraph(ctx, id, false); err != nil {
		return int(n), wrap(doing, err)
	}
	return int(n), wrap(doing, q.rdb.HDel(ctx, outbox, field).Err())
}

// noteFollow notes a follow event of graph id in the outbox of its first
// node's queue (served by a Worker, since that node runs there), so that
// a process killed in what follows leaves the event for the next
// reservation from that queue. It returns the outbox and the event's
// field, or an error matching ErrNotFound for an unknown graph.
func (q *Queue) noteFollow(ctx context.Context, id string) (outbox, field string, err error) {
	gb := q.graphBase(id)
	first, err := q.rdb.LIndex(ctx, gb+":ord", 0).Result()
	if errors.Is(err, redis.Nil) {
		return "", "", queue.ErrNotFound
	}
	if err != nil {
		return "", "", err
	}
	rq, err := q.rdb.HGet(ctx, gb+":q", first).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return "", "", err
	}
	if err := q.register(ctx, rq); err != nil {
		return "", "", err
	}
	seq, err := noteGraphScript.Run(ctx, q.rdb, []string{q.base(rq)}, id).Int64()
	if err != nil {
		return "", "", err
	}
	return q.base(rq) + ":bout", strconv.FormatInt(seq, 10), nil
}

// GetGraph reads graph id and its nodes (see driver.Graphs), in one
// pipeline of the graph's slot.
func (q *Queue) GetGraph(ctx context.Context, id string) (driver.GraphInfo, []driver.GraphNodeInfo, error) {
	doing := "reading graph " + id
	if err := ctxErr(ctx, doing); err != nil {
		return driver.GraphInfo{}, nil, err
	}
	info, nodes, err := q.graph(ctx, id, true)
	return info, nodes, wrap(doing, err)
}

// graph reads graph id, and its nodes when withNodes.
func (q *Queue) graph(ctx context.Context, id string, withNodes bool) (driver.GraphInfo, []driver.GraphNodeInfo, error) {
	if id == "" {
		return driver.GraphInfo{}, nil, queue.ErrNotFound
	}
	gb := q.graphBase(id)
	pipe := q.rdb.Pipeline()
	rec := pipe.HMGet(ctx, gb, graphFields...)
	var ord *redis.StringSliceCmd
	var st, jid, aft, af *redis.MapStringStringCmd
	if withNodes {
		ord = pipe.LRange(ctx, gb+":ord", 0, -1)
		st, jid = pipe.HGetAll(ctx, gb+":st"), pipe.HGetAll(ctx, gb+":jid")
		aft, af = pipe.HGetAll(ctx, gb+":aft"), pipe.HGetAll(ctx, gb+":af")
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return driver.GraphInfo{}, nil, err
	}
	info, ok := decodeGraph(rec.Val())
	if !ok {
		return driver.GraphInfo{}, nil, queue.ErrNotFound
	}
	if !withNodes {
		return info, nil, nil
	}
	nodes := make([]driver.GraphNodeInfo, 0, len(ord.Val()))
	for _, n := range ord.Val() {
		nodes = append(nodes, nodeInfo(n, st.Val()[n], jid.Val()[n], aft.Val()[n], af.Val()[n]))
	}
	return info, nodes, nil
}

// nodeStates maps the scripts' state letters to the contract's.
var nodeStates = map[string]driver.NodeState{
	"w": driver.NodeWaiting, "p": driver.NodePending, "d": driver.NodeDone, "f": driver.NodeFailed, "c": driver.NodeCancelled,
}

func nodeInfo(name, st, jid, aft, af string) driver.GraphNodeInfo {
	var after []string
	if aft != "" {
		after = strings.Split(aft, "\x00")
	}
	return driver.GraphNodeInfo{Name: name, JobID: jid, State: nodeStates[st], After: after, AllowFailed: af == "1"}
}

// GraphNode reads the node name of graph id (see driver.Graphs).
func (q *Queue) GraphNode(ctx context.Context, id, name string) (driver.GraphNodeInfo, error) {
	doing := "reading node " + name + " of graph " + id
	if err := ctxErr(ctx, doing); err != nil {
		return driver.GraphNodeInfo{}, err
	}
	if id == "" {
		return driver.GraphNodeInfo{}, fmt.Errorf("redisqueue: %s: %w", doing, queue.ErrNotFound)
	}
	gb := q.graphBase(id)
	pipe := q.rdb.Pipeline()
	rec := pipe.HMGet(ctx, gb, graphFields...)
	st, jid := pipe.HGet(ctx, gb+":st", name), pipe.HGet(ctx, gb+":jid", name)
	aft, af := pipe.HGet(ctx, gb+":aft", name), pipe.HGet(ctx, gb+":af", name)
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return driver.GraphNodeInfo{}, wrap(doing, err)
	}
	if _, ok := decodeGraph(rec.Val()); !ok || st.Val() == "" {
		return driver.GraphNodeInfo{}, fmt.Errorf("redisqueue: %s: %w", doing, queue.ErrNotFound)
	}
	return nodeInfo(name, st.Val(), jid.Val(), aft.Val(), af.Val()), nil
}

// ListGraphs pages through the graphs, newest first (see driver.Graphs).
// Next is the index's sequence of the page's last graph. Index entries of
// graphs past their retention are deleted as they are met; graphs still
// being dispatched are left out.
func (q *Queue) ListGraphs(ctx context.Context, f driver.BatchFilter) (driver.GraphPage, error) {
	const doing = "listing graphs"
	if err := ctxErr(ctx, doing); err != nil {
		return driver.GraphPage{}, err
	}
	limit, err := driver.BatchLimit(f.Limit)
	if err != nil {
		return driver.GraphPage{}, err
	}
	graphs, next, err := indexPage(ctx, q, q.gindex, limit, f.After, driver.ErrGraph, q.graphBase, graphFields, decodeGraph)
	if err != nil {
		return driver.GraphPage{}, wrap(doing, err)
	}
	return driver.GraphPage{Graphs: graphs, Next: next}, nil
}

// settleNodeEvents applies the graph events of one queue's outbox, graph
// by graph in the order they were noted.
func (q *Queue) settleNodeEvents(ctx context.Context, name string, evs []nodeEvent, cancelling string) error {
	slices.SortFunc(evs, func(a, b nodeEvent) int { return cmp.Compare(a.seq, b.seq) })
	var order []string
	byGraph := map[string][]nodeEvent{}
	for _, e := range evs {
		if byGraph[e.graph] == nil {
			order = append(order, e.graph)
		}
		byGraph[e.graph] = append(byGraph[e.graph], e)
	}
	for _, gid := range order {
		for es := range slices.Chunk(byGraph[gid], memberChunk) {
			if err := q.applyNodeEvents(ctx, name, gid, es, cancelling == q.graphBase(gid)); err != nil {
				return err
			}
		}
	}
	return nil
}
