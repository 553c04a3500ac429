package sqlqueue

// The statements of lists, payload searches, bulk selections and the
// per-queue probes of counts and pruning, which the three dialects build
// alike at run time from a filter: the parts that differ (what "ready",
// "scheduled" and "running" mean on the dialect's indexes, a substring
// test, how the running jobs of a queue are found) are each dialect's
// listFlavor, in its own file. The builders write the queue's table names
// as New quoted them, with ? placeholders; q.rebind readies the whole
// statement for the dialect.

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	queue "github.com/meridianjobs/meridian/queue/driver"
)

// listFlavor is what a dialect's lists need of it beyond the portable
// statements of this file. Each dialect implements it in its own file, as
// part of its dialect.
type listFlavor interface {
	// pendingCond is the condition that a pending row is ready, scheduled
	// or running (s) at now.
	pendingCond(s queue.JobState, now int64) (string, []any)
	// runningList is listQuery's part for one queue (the i-th) of running
	// jobs: its first n jobs matching cond (with args) in order, among the
	// first scan due jobs of its claim order (runningHead). held is how
	// many jobs of the queue the live workers report holding: a dialect
	// that looks rows up one by one may stop once it found that many.
	runningList(ctx context.Context, q *Queue, st statements, queueName string, now int64, scan int, held int64, cond string, args []any, order string, n, i int) (string, []any, error)
	// contains is a condition true when col contains the bind parameter (a
	// substring, case-sensitive; bytes when blob).
	contains(col string, blob bool) string
	// listFrom is the FROM item of a list's read of one queue's jobs
	// (table t) in order o: the jobs table, with a hint naming the index
	// of that order (the claim index for byClaim, the list index for
	// byFinish) where the dialect's planner would otherwise read the
	// index from the start of the queue instead of from the cursor.
	listFrom(t tableNames, o listOrder) string
}

// byPriority returns the condition restricting a pending-job query of one
// queue to prios (see priorities), or "" when prios is nil.
func byPriority(prios []any) string {
	if prios == nil {
		return ""
	}
	return " AND priority IN (" + placeholders(len(prios)) + ")"
}

// stateCond returns the condition selecting jobs in state s at now.
func (q *Queue) stateCond(s queue.JobState, now int64) (string, []any, error) {
	switch s {
	case queue.StateReady, queue.StateScheduled, queue.StateRunning:
		cond, args := q.d.pendingCond(s, now)
		return "state = 'pending' AND " + cond, args, nil
	case queue.StateDone:
		return "state = 'done'", nil, nil
	case queue.StateDead:
		return "state = 'dead'", nil, nil
	case queue.StateCancelled:
		return "state = 'cancelled'", nil, nil
	case queue.StateGrouped:
		return "state = 'grouped'", nil, nil
	case queue.StateSequenced:
		return "state = 'sequenced'", nil, nil
	}
	return "", nil, fmt.Errorf("sqlqueue: listing jobs: unknown state %q", s)
}

// expiryPendingCond is pendingCond where the lease expiry has a column of
// its own, lease_expires_at (every dialect): a running job is one whose
// lease has not expired. No index holds lease_expires_at (so that a claim
// changes no indexed column), so the running list reads only the head of
// the claim order of the queues the workers hold jobs in
// (expiryRunningList, runningBound), and the running count is what the
// workers report (heldByQueue).
func expiryPendingCond(s queue.JobState, now int64) (string, []any) {
	switch s {
	case queue.StateReady:
		return "run_at <= ? AND lease_expires_at <= ?", []any{now, now}
	case queue.StateScheduled:
		return "run_at > ? AND lease_expires_at <= ?", []any{now, now}
	}
	return "lease_expires_at > ?", []any{now}
}

// runningHead is the query of the first scan due jobs (their cols) of one
// queue in claim order; its arguments are the queue, now and scan
// (runningBound). A job is claimed from the head, so it stays there while
// it runs unless more than scan jobs of a higher priority (or with an
// earlier run_at) came before it meanwhile.
func runningHead(jobs, cols string) string {
	return "SELECT " + cols + " FROM " + jobs + " WHERE queue = ? AND state = 'pending' AND run_at <= ? ORDER BY priority DESC, run_at, seq LIMIT ?"
}

// filterCond turns f's state, name and tag into a condition on the jobs
// with its arguments (the cursor is listQuery's: see listOrder.after).
func (q *Queue) filterCond(f queue.JobFilter, now int64) (cond string, args []any, err error) {
	cond, args, err = q.stateCond(f.State, now)
	if err != nil {
		return "", nil, err
	}
	if f.Name != "" {
		cond, args = cond+" AND name = ?", append(args, f.Name)
	}
	if f.Tag != "" {
		tag, _ := json.Marshal(f.Tag)
		cond, args = cond+" AND "+q.d.contains("tags", false), append(args, string(tag))
	}
	return cond, args, nil
}

// listQuery returns the query template (and its arguments) of the first n
// jobs matching cond after the cursor after (nil: from the start) and up
// to upTo, that job included (nil: no end), in the
// state's order (listOrder), selecting cols, which must hold the order's
// key columns: one index scan per queue, merged. Waiting jobs are read
// per priority on the claim index (see queueList), running ones from the
// head of the claim order of the queues the live workers report holding
// jobs in, as far as runningBound of what they hold (dialect.runningList;
// jobs held by a process that does not report, a bare Reserve, are not
// found), dead and finished ones
// on the list index (state, queue, finished_at, seq). Without a queue filter the
// queues come from a loose index scan; with more than maxUnionQueues the
// query is one scan sorted over the whole state. It returns "" when no
// queue has jobs in the state.
func (q *Queue) listQuery(ctx context.Context, st statements, f queue.JobFilter, now int64, cond string, args []any, after, upTo *listCursor, n int, cols string) (string, []any, error) {
	return q.lister(st, f, now).query(ctx, cond, args, after, upTo, n, cols)
}

// lister builds the list queries of one filter on st (see listQuery),
// reading the queues and their priorities once for all the queries it
// builds: a payload search builds two per window, and on MariaDB each
// loose scan step is a round trip.
type lister struct {
	q      *Queue
	st     statements
	f      queue.JobFilter
	now    int64
	queues []string         // the queues with jobs in the state, once read
	prios  map[string][]any // each queue's priorities, once read
	// held is what the live workers report they hold, by queue, once
	// read (heldRead) for a running list.
	held     map[string]int64
	heldRead bool
}

func (q *Queue) lister(st statements, f queue.JobFilter, now int64) *lister {
	return &lister{q: q, st: st, f: f, now: now, prios: map[string][]any{}}
}

// readPriorities reads the priorities of those of queues whose
// priorities l has not read yet, in one call.
func (l *lister) readPriorities(ctx context.Context, queues []string) error {
	var missing []string
	for _, name := range queues {
		if _, ok := l.prios[name]; !ok {
			missing = append(missing, name)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	prios, err := l.q.priorities(ctx, l.st, missing...)
	if err != nil {
		return err
	}
	maps.Copy(l.prios, prios)
	return nil
}

// query is listQuery with l's filter.
func (l *lister) query(ctx context.Context, cond string, args []any, after, upTo *listCursor, n int, cols string) (string, []any, error) {
	q, st, f, now := l.q, l.st, l.f, l.now
	o := orderOf(f.State)
	queues := []string{f.Queue}
	if f.State == queue.StateRunning && !l.heldRead {
		held, err := q.heldByQueue(ctx, st, fromMicros(now))
		if err != nil {
			return "", nil, err
		}
		l.held, l.heldRead = held, true
	}
	if f.State == queue.StateRunning && f.Queue != "" && l.held[f.Queue] <= 0 {
		return "", nil, nil // nobody holds a job of it
	}
	if f.Queue == "" && l.queues != nil {
		queues = l.queues
	} else if f.Queue == "" {
		state := statePending
		switch f.State {
		case queue.StateDone:
			state = stateDone
		case queue.StateDead:
			state = stateDead
		case queue.StateCancelled:
			state = stateCancelled
		case queue.StateGrouped:
			state = stateGrouped
		case queue.StateSequenced:
			state = stateSequenced
		}
		var err error
		if queues, err = q.knownQueues(ctx, st, state); err != nil {
			return "", nil, err
		}
		if f.State == queue.StateRunning {
			queues = slices.DeleteFunc(queues, func(name string) bool { return l.held[name] <= 0 })
		}
		l.queues = append([]string{}, queues...) // not nil: read
	}
	if len(queues) == 0 {
		return "", nil, nil
	}
	if f.Queue == "" && len(queues) > maxUnionQueues {
		c, a := o.between(cond, args, after, upTo)
		return "SELECT " + cols + " FROM " + q.t.jobs + " WHERE " + c + " ORDER BY " + o.sql() + " LIMIT ?", append(a, n), nil
	}
	if f.State == queue.StateReady || f.State == queue.StateScheduled {
		if err := l.readPriorities(ctx, queues); err != nil {
			return "", nil, err
		}
	}
	var parts []string
	var all []any
	for _, name := range queues {
		i := len(parts)
		var sub []string
		var subArgs []any
		var err error
		switch f.State {
		case queue.StateRunning:
			c, a := o.between(cond, args, after, upTo)
			var one string
			one, subArgs, err = q.d.runningList(ctx, q, st, name, now, runningBound(l.held[name]), l.held[name], c, a, o.sql(), n, i)
			sub = []string{one}
		case queue.StateReady, queue.StateScheduled:
			sub, subArgs, err = l.queueList(ctx, name, cond, args, after, upTo, n, i, cols)
		default:
			c, a := o.between(cond, args, after, upTo)
			sub = []string{fmt.Sprintf("SELECT * FROM (SELECT %s FROM %s WHERE queue = ? AND %s ORDER BY %s LIMIT ?) b%d", cols, q.d.listFrom(q.t, o), c, o.sql(), i)}
			subArgs = append(append([]any{name}, a...), n)
		}
		if err != nil {
			return "", nil, err
		}
		parts = append(parts, sub...)
		all = append(all, subArgs...)
	}
	if len(parts) == 0 {
		return "", nil, nil
	}
	if len(parts) == 1 {
		return parts[0], all, nil
	}
	return "SELECT " + cols + " FROM (" + strings.Join(parts, " UNION ALL ") + ") u ORDER BY " + o.sql() + " LIMIT ?", append(all, n), nil
}

// queueList is listQuery's part for the waiting (ready or scheduled) jobs
// of one queue (the i-th): one subquery per priority of its pending jobs
// (see priorities), each a range of the claim index read in its order
// (run_at, seq), so a page of ready jobs never reads the scheduled ones
// after them, nor the reverse. Priorities before the cursor's are left
// out, and so are those after upTo's. With more priorities than
// maxPriorities, one query filters and sorts the queue's pending jobs.
func (l *lister) queueList(ctx context.Context, name, cond string, args []any, after, upTo *listCursor, n, i int, cols string) ([]string, []any, error) {
	prios := l.prios[name]
	o := byClaim
	if prios == nil {
		c, a := o.between(cond, args, after, upTo)
		return []string{fmt.Sprintf("SELECT * FROM (SELECT %s FROM %s WHERE queue = ? AND %s ORDER BY %s LIMIT ?) b%d", cols, l.q.d.listFrom(l.q.t, o), c, o.sql(), i)},
			append(append([]any{name}, a...), n), nil
	}
	from := l.q.d.listFrom(l.q.t, o)
	var parts []string
	var all []any
	for k, p := range prios {
		prio := p.(int64)
		// The cursor's bounds come first (see between).
		var terms []string
		var targs []any
		if after != nil {
			if prio > after.prio {
				continue // wholly before the cursor
			}
			if prio == after.prio {
				terms, targs = append(terms, "run_at >= ? AND (run_at > ? OR seq > ?)"), append(targs, after.at, after.at, after.seq)
			}
		}
		if upTo != nil {
			if prio < upTo.prio {
				continue // wholly after the end
			}
			if prio == upTo.prio {
				terms, targs = append(terms, "run_at <= ? AND (run_at < ? OR seq <= ?)"), append(targs, upTo.at, upTo.at, upTo.seq)
			}
		}
		c := strings.Join(append(terms, cond), " AND ")
		parts = append(parts, fmt.Sprintf("SELECT * FROM (SELECT %s FROM %s WHERE queue = ? AND priority = ? AND %s ORDER BY run_at, seq LIMIT ?) b%d_%d", cols, from, c, i, k))
		all = append(append(append(append(all, name, prio), targs...), args...), n)
	}
	return parts, all, nil
}

// sql is the ORDER BY list.
func (o listOrder) sql() string {
	if o == byFinish {
		return "finished_at DESC, seq DESC"
	}
	return "priority DESC, run_at, seq"
}

// keyCols are the columns of the order's key, as dest scans them.
func (o listOrder) keyCols() string {
	if o == byFinish {
		return "finished_at, seq"
	}
	return "priority, run_at, seq"
}

// after is the condition that a job comes after c in the order, written
// so that its first term bounds the index range.
func (o listOrder) after(c listCursor) (string, []any) {
	if o == byFinish {
		return "finished_at <= ? AND (finished_at < ? OR seq < ?)", []any{c.at, c.at, c.seq}
	}
	return "priority <= ? AND (priority < ? OR (run_at >= ? AND (run_at > ? OR seq > ?)))", []any{c.prio, c.prio, c.at, c.at, c.seq}
}

// upTo is the condition that a job comes no later than c in the order (c
// itself included), written as after is.
func (o listOrder) upTo(c listCursor) (string, []any) {
	if o == byFinish {
		return "finished_at >= ? AND (finished_at > ? OR seq >= ?)", []any{c.at, c.at, c.seq}
	}
	return "priority >= ? AND (priority > ? OR (run_at <= ? AND (run_at < ? OR seq <= ?)))", []any{c.prio, c.prio, c.at, c.at, c.seq}
}

// between adds to cond (and its args) that a job comes after after and
// no later than upTo, where they are not nil. The bounds come first:
// SQLite bounds an index range by the first of two conditions on a
// column, so "run_at <= now AND run_at <= edge" would read every ready
// job of the queue up to now, not up to the edge.
func (o listOrder) between(cond string, args []any, after, upTo *listCursor) (string, []any) {
	var terms []string
	var targs []any
	if after != nil {
		c, a := o.after(*after)
		terms, targs = append(terms, c), append(targs, a...)
	}
	if upTo != nil {
		c, a := o.upTo(*upTo)
		terms, targs = append(terms, c), append(targs, a...)
	}
	if terms == nil {
		return cond, args
	}
	return strings.Join(append(terms, cond), " AND "), append(targs, args...)
}

// finishedProbe is the probe of the list index for the jobs in state
// (a constant of this package, written into the SQL so that PostgreSQL's
// partial list index, WHERE state <> 'pending', serves a generic plan
// too) of one queue whose finished_at is op ("<" or ">=") a parameter.
func finishedProbe(state, op string) string {
	return "state = '" + state + "' AND queue = ? AND finished_at " + op + " ?"
}

// countFinishedQuery is the statement of countFinished for names, each
// probe limited to its entry of lims: one count per queue, in order. A
// probe reads its range in the list index's order (ORDER BY finished_at,
// free on that index), so that no planner takes a table scan that stops
// at the limit instead (PostgreSQL did, for a limit of one, when its
// statistics said matching rows were common).
func (q *Queue) countFinishedQuery(state, op string, at int64, names []string, lims []int64) (string, []any) {
	parts := make([]string, len(names))
	args := make([]any, 0, 2*len(names))
	for i, name := range names {
		parts[i] = fmt.Sprintf("SELECT COUNT(*) FROM (SELECT 1 AS x FROM %s WHERE %s ORDER BY finished_at LIMIT %d) b%d", q.t.jobs, finishedProbe(state, op), lims[i], i)
		args = append(args, name, at)
	}
	return q.rebind(strings.Join(parts, " UNION ALL ")), args
}

// pruneQuery is the statement of one step of pruneJobs: for each named
// queue, the IDs of up to lim of its jobs in state that finished before
// cutoff, oldest first, with the queue's name.
func (q *Queue) pruneQuery(state string, cutoff int64, names []string, lim int) (string, []any) {
	parts := make([]string, len(names))
	args := make([]any, 0, 2*len(names))
	for i, name := range names {
		parts[i] = fmt.Sprintf("SELECT id, queue FROM (SELECT id, queue FROM %s WHERE %s ORDER BY finished_at LIMIT %d) b%d", q.t.jobs, finishedProbe(state, "<"), lim, i)
		args = append(args, name, cutoff)
	}
	return q.rebind(strings.Join(parts, " UNION ALL ")), args
}

// cancelledQuery is the statement of CancelledSince for names: the IDs
// and lease tokens of their jobs cancelled while they ran, at or after
// since.
func (q *Queue) cancelledQuery(since int64, names []string) (string, []any) {
	parts := make([]string, len(names))
	args := make([]any, 0, 2*len(names))
	for i, name := range names {
		parts[i] = "SELECT id, lease_token FROM " + q.t.jobs + " WHERE " + finishedProbe(stateCancelled, ">=") + " AND lease_token IS NOT NULL"
		args = append(args, name, since)
	}
	return q.rebind(strings.Join(parts, " UNION ALL ")), args
}

// oldestQuery is OldestReady's statement for the queues names: per queue
// the least run_at of the first ready job of each priority, or of all its
// ready jobs when it has too many priorities to list; one row per queue
// (queue, least run_at or NULL).
func (q *Queue) oldestQuery(names []string, prios map[string][]any, now int64) (string, []any) {
	cond, cargs := q.d.pendingCond(queue.StateReady, now)
	ready := "FROM " + q.t.jobs + " WHERE queue = ? AND state = 'pending'"
	var parts []string
	var args []any
	for _, name := range names {
		ps := prios[name]
		if ps == nil {
			parts = append(parts, fmt.Sprintf("SELECT * FROM (SELECT MIN(queue) AS q, MIN(run_at) AS t %s AND %s) p%d", ready, cond, len(parts)))
			args = append(append(args, name), cargs...)
			continue
		}
		for _, p := range ps {
			parts = append(parts, fmt.Sprintf("SELECT * FROM (SELECT queue AS q, run_at AS t %s AND priority = ? AND %s ORDER BY run_at LIMIT 1) p%d", ready, cond, len(parts)))
			args = append(append(args, name, p), cargs...)
		}
	}
	return q.rebind("SELECT q, MIN(t) FROM (" + strings.Join(parts, " UNION ALL ") + ") o WHERE q IS NOT NULL GROUP BY q"), args
}

// scheduledCountQuery counts, up to countCap+1, the jobs of queueName
// (of priorities prios: see priorities) that are scheduled at now and due
// before the current bucket ends (see splitPending), on the claim index.
func (q *Queue) scheduledCountQuery(queueName string, prios []any, now int64) (string, []any) {
	cond, args := q.d.pendingCond(queue.StateScheduled, now)
	cond, args = cond+" AND run_at < ?", append(args, schedBucketEnd(now))
	args = append(append([]any{queueName}, prios...), args...)
	return q.rebind("SELECT COUNT(*) FROM (SELECT 1 AS x FROM " + q.t.jobs + " WHERE queue = ? AND state = 'pending'" + byPriority(prios) +
		" AND " + cond + " LIMIT " + strconv.Itoa(countCap+1) + ") b"), args
}

// searchCond adds to a list's condition (and its arguments) that the
// job's payload holds each of texts.
func (q *Queue) searchCond(cond string, args []any, texts []string) (string, []any) {
	args = slices.Clip(args)
	for _, t := range texts {
		cond, args = cond+" AND "+q.d.contains("payload", true), append(args, []byte(t))
	}
	return cond, args
}

// countQuery counts the rows of list, a list statement with its
// arguments (see listQuery): with texts, it also counts those whose
// payload holds each of them (a second column).
func (q *Queue) countQuery(list string, args []any, texts []string) (string, []any) {
	if len(texts) == 0 {
		return q.rebind("SELECT COUNT(*) FROM (" + list + ") s"), args
	}
	conds := make([]string, len(texts))
	targs := make([]any, len(texts), len(texts)+len(args))
	for i, t := range texts {
		conds[i], targs[i] = q.d.contains("payload", true), []byte(t)
	}
	return q.rebind("SELECT COUNT(*), COALESCE(SUM(CASE WHEN " + strings.Join(conds, " AND ") + " THEN 1 ELSE 0 END), 0) FROM (" + list + ") s"),
		append(targs, args...)
}
