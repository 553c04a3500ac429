package sqlqueue

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/meridianjobs/meridian/queue"
)

// Bounds of the inspection queries.
const (
	countCap = 10000 // counts are exact up to this, then Count.More
	// runningScan is the most due jobs per queue, in claim order, the
	// running list reads, since no index holds the lease expiry (see
	// expiryPendingCond): jobs are claimed in that order, so the running
	// ones are at its head. It reads runningPerHeld per job the workers
	// report they hold in the queue, plus runningSlack (see runningBound).
	runningScan    = 20000
	runningPerHeld = 4
	runningSlack   = 1000
	searchRows     = 10000           // a payload search examines at most this many jobs per page
	searchTimeout  = 2 * time.Second // and runs at most this long
	// A payload search examines its page's jobs a window at a time (see
	// search): the page's size or searchWindow jobs first, then twice as
	// many each time up to searchMaxWindow, and starts no new window
	// after searchBudget, so a page answers in about that time however
	// slow the store.
	searchWindow    = 100
	searchMaxWindow = 4000
	searchBudget    = 40 * time.Millisecond
	statsWindow     = time.Hour // QueueStats' throughput window
	defaultPage     = 50
	maxPage         = 500
	maxStatsQueues  = 1000
	// maxPriorities is how many distinct priorities of one queue the
	// inspection queries enumerate (see priorities) before they give up
	// on the claim index and filter every pending row of the queue.
	maxPriorities = 32
	// maxUnionQueues is how many queues a ListJobs without a queue filter
	// merges one index scan each (see listQuery); with more it runs one
	// query sorted over every row of the state.
	maxUnionQueues = 64
)

// knownQueues lists the queues with jobs in state (statePending and the
// others of the counts table), sorted, at most maxStatsQueues: one read
// of the counts table the triggers keep (see readCounts), whatever the
// number of jobs and on every dialect one statement (a loose index scan
// took one statement per queue on MariaDB).
func (q *Queue) knownQueues(ctx context.Context, st statements, state string) ([]string, error) {
	return queryStrings(ctx, st, q.stmt(qKnownQueues), state)
}

// priorities lists the distinct priorities of each named queue's pending
// jobs, highest first, by a loose scan over the claim index (queue,
// priority, run_at, seq), so that a condition on run_at can use the index
// as one range per priority: "scheduled" and "running" jobs (run_at in
// the future) are then found without reading the ready ones. A queue
// with more than maxPriorities of them maps to nil; callers then filter
// without the priority list. A queue with no pending job maps to one
// value, so that an IN list stays valid.
func (q *Queue) priorities(ctx context.Context, st statements, names ...string) (map[string][]any, error) {
	byQueue, err := q.d.priorities(ctx, q, st, names)
	if err != nil {
		return nil, err
	}
	out := make(map[string][]any, len(names))
	for _, name := range names {
		prios := byQueue[name]
		switch {
		case len(prios) > maxPriorities:
			out[name] = nil
		case len(prios) == 0:
			out[name] = []any{int64(0)} // no pending job: any one value keeps the IN list valid
		default:
			vs := make([]any, len(prios))
			for i, p := range prios {
				vs[i] = p
			}
			out[name] = vs
		}
	}
	return out, nil
}

// prioritiesEach runs the loose scan of priorities as the dialect's
// qPriorities, one statement per queue.
func (q *Queue) prioritiesEach(ctx context.Context, st statements, names []string) (map[string][]int64, error) {
	out := make(map[string][]int64, len(names))
	for _, name := range names {
		prios, err := queryInts(ctx, st, q.stmt(qPriorities), name, name)
		if err != nil {
			return nil, err
		}
		out[name] = prios
	}
	return out, nil
}

// queryInts runs a query returning one integer column.
func queryInts(ctx context.Context, st statements, query string, args ...any) ([]int64, error) {
	rows, err := st.Query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var n int64
		if err := rows.Scan(&n); err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, rows.Err()
}

// byPriority returns the condition restricting a pending-job query of one
// queue to prios (see priorities), or "" when prios is nil.
func byPriority(prios []any) string {
	if prios == nil {
		return ""
	}
	return " AND priority IN (" + placeholders(len(prios)) + ")"
}

func capped(n int64) queue.Count {
	if n > countCap {
		return queue.Count{N: countCap, More: true}
	}
	return queue.Count{N: n}
}

// QueueStats returns one entry per known queue (with jobs in any state,
// a pause, or metrics in the last hour), sorted by name. The totals by
// state are exact (see Counts); Scheduled is exact up to 10,000, past
// which Ready is an estimate; Running is what the workers report they
// hold, as Counts says; throughput, runtime and wait come from the metrics rows of the
// last hour (JobsPerMinute from the last queue.RateWindow), summed over
// every process.
func (q *Queue) QueueStats(ctx context.Context) ([]queue.QueueStats, error) {
	if err := q.use(ctx); err != nil {
		return nil, err
	}
	q.flushMetricsLogged(ctx)
	now := time.Now()
	var out []queue.QueueStats
	err := q.inspectRead(ctx, 0, false, func(st statements) error {
		var err error
		out, err = q.queueStats(ctx, st, now)
		return err
	})
	return out, err
}

// queueStats is QueueStats' reads, on st.
func (q *Queue) queueStats(ctx context.Context, st statements, now time.Time) ([]queue.QueueStats, error) {
	counts, err := q.readCounts(ctx, st)
	if err != nil {
		return nil, err
	}
	later, err := q.readScheduled(ctx, st, micros(now))
	if err != nil {
		return nil, err
	}
	held, err := q.heldByQueue(ctx, st, now)
	if err != nil {
		return nil, q.wrap(ctx, err, "reading the workers' held jobs")
	}
	byName := make(map[string]*queue.QueueCounts, len(counts))
	var names []string
	for i := range counts {
		byName[counts[i].Queue] = &counts[i]
		names = append(names, counts[i].Queue)
	}
	paused, err := queryStrings(ctx, st, q.stmt(qPaused))
	if err != nil {
		return nil, q.wrap(ctx, err, "listing paused queues")
	}
	names = append(names, paused...)
	windowStart := now.Add(-statsWindow).Truncate(time.Minute).Unix()
	recentStart := now.Add(-queue.RateWindow).Truncate(time.Minute).Unix()
	rs, err := st.Query(ctx, q.stmt(qStatsMetrics), recentStart, windowStart)
	if err != nil {
		return nil, q.wrap(ctx, err, "reading metrics")
	}
	sums := map[string]metricAgg{}
	recent := map[string]int64{}
	for rs.Next() {
		var name string
		var a metricAgg
		var r int64
		if err := rs.Scan(&name, &a.processed, &a.failed, &a.runtimeTotal, &a.runtimeMax, &a.waitTotal, &r); err != nil {
			rs.Close()
			return nil, q.wrap(ctx, err, "reading metrics")
		}
		sums[name], recent[name] = a, r
		names = append(names, name)
	}
	rs.Close()
	if err := rs.Err(); err != nil {
		return nil, q.wrap(ctx, err, "reading metrics")
	}
	slices.Sort(names)
	names = slices.Compact(names)
	if len(names) > maxStatsQueues {
		names = names[:maxStatsQueues]
	}
	prios, err := q.priorities(ctx, st, pendingQueues(counts)...)
	if err != nil {
		return nil, q.wrap(ctx, err, "reading the queues' priorities")
	}
	out := make([]queue.QueueStats, 0, len(names))
	for _, name := range names {
		// The totals by state are the counts the triggers keep; the
		// running ones are the workers' reports; only the scheduled ones
		// are counted, up to the cap, on the claim index (see
		// splitPending).
		s := queue.QueueStats{Queue: name, Paused: slices.Contains(paused, name), Window: statsWindow}
		if c := byName[name]; c != nil {
			if err := q.splitPending(ctx, st, c, prios[c.Queue], micros(now), later[name], held[name]); err != nil {
				return nil, err
			}
			s.Ready, s.Scheduled, s.Running = c.Ready, c.Scheduled, c.Running
			s.Dead, s.Done, s.Cancelled = queue.Count{N: c.Dead}, queue.Count{N: c.Done}, queue.Count{N: c.Cancelled}
		}
		if a, ok := sums[name]; ok {
			s.Processed, s.Failed = a.processed, a.failed
			s.JobsPerMinute = queue.PerMinute(recent[name], now)
			s.MaxRuntime = time.Duration(a.runtimeMax) * time.Microsecond
			if runs := a.processed + a.failed; runs > 0 {
				s.AvgRuntime = time.Duration(a.runtimeTotal/runs) * time.Microsecond
				s.AvgWait = time.Duration(a.waitTotal/runs) * time.Microsecond
			}
		}
		out = append(out, s)
	}
	return out, nil
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
func runningHead(cols string) string {
	return "SELECT " + cols + " FROM {jobs} WHERE queue = ? AND state = 'pending' AND run_at <= ? ORDER BY priority DESC, run_at, seq LIMIT ?"
}

// runningBound is how many due jobs of a queue the running list reads at
// the head of its claim order when the live workers report they hold held
// of its jobs: runningPerHeld per job held plus runningSlack, for the
// jobs of a higher priority pushed after the claims and those whose
// leases expired, at most runningScan. The running jobs of a queue
// nobody serves are not looked for at all (0).
func runningBound(held int64) int {
	if held <= 0 {
		return 0
	}
	return int(min(held*runningPerHeld+runningSlack, runningScan))
}

// expiryRunningList is runningList over the head of the claim order, read
// whole (PostgreSQL: the claim index does not hold the lease expiry).
func expiryRunningList(queueName string, now int64, scan int, cond string, args []any, order string, n, i int) (string, []any, error) {
	return "SELECT * FROM (SELECT " + jobCols + " FROM (" + runningHead(jobCols) + ") h WHERE " + cond + " ORDER BY " + order + " LIMIT ?) b" + strconv.Itoa(i),
		append(append([]any{queueName, now, scan}, args...), n), nil
}

// coveredRunningList is runningList where the claim index ends in
// lease_expires_at (SQLite): the head of the claim order is read
// from the index alone, and only the running jobs' rows by seq (MariaDB
// over 1,000,000 jobs: 1.3 s per queue when the head is read whole). The
// running jobs' seqs are a derived table joined to the jobs, not an IN
// list: with the list in claim order, MariaDB otherwise drives the join
// from the (state, queue, ...) index and sorts every pending job of the
// queue.
func coveredRunningList(queueName string, now int64, scan int, cond string, args []any, order string, n, i int) (string, []any, error) {
	return "SELECT * FROM (SELECT " + jobCols + " FROM (SELECT seq AS rseq FROM (" + runningHead("seq, lease_expires_at AS x") +
			") h WHERE x > ?) r JOIN {jobs} ON seq = r.rseq WHERE " + cond + " ORDER BY " + order + " LIMIT ?) b" + strconv.Itoa(i),
		append(append([]any{queueName, now, scan, now}, args...), n), nil
}

// ListJobs returns one page of jobs in f.State, by keyset in the order of
// the index that orders the state (listOrder): waiting and running jobs
// in claim order (priority, then run time, then insertion), from the
// claim index; dead letters (by failure time), done and cancelled jobs
// by the time they finished, newest first, from the list index. Limit
// defaults to 50 and is capped at 500.
//
// A payload search examines at most 10,000 jobs (f.Scan, if smaller)
// after the cursor, a window at a time, and starts no new window after
// 40 ms once it has examined the first (the page's size, at least 100,
// or f.Scan, if fewer), so a page answers in about that time on every
// dialect (see search). Its reads run at most two seconds (on PostgreSQL
// a statement timeout, elsewhere the context). When it stops at either
// bound before filling the page, JobPage.Scanned says how many jobs it
// examined and Next continues after the last of them.
//
// Without a queue filter the page merges one ordered index scan per queue
// (up to 64 queues), so its cost follows the page size, not the table's.
func (q *Queue) ListJobs(ctx context.Context, f queue.JobFilter) (queue.JobPage, error) {
	if err := q.use(ctx); err != nil {
		return queue.JobPage{}, err
	}
	now := micros(time.Now())
	cond, args, err := q.filterCond(f, now)
	if err != nil {
		return queue.JobPage{}, err
	}
	o := orderOf(f.State)
	var after *listCursor
	if f.After != "" {
		c, err := o.decode(f.After)
		if err != nil {
			return queue.JobPage{}, fmt.Errorf("sqlqueue: listing jobs after %q: %w", f.After, queue.ErrBadCursor)
		}
		after = &c
	}
	limit := f.Limit
	if limit <= 0 {
		limit = defaultPage
	}
	limit = min(limit, maxPage)
	bound := searchRows
	if f.Scan > 0 {
		bound = min(f.Scan, searchRows)
	}
	var timeout time.Duration
	if f.Search != "" {
		timeout = searchTimeout
	}
	var rows []row
	var scanned int
	var edge *listCursor
	err = q.inspectRead(ctx, timeout, true, func(st statements) error {
		if f.Search != "" {
			var err error
			rows, scanned, edge, err = q.search(ctx, st, f, now, cond, slices.Clip(args), after, limit, bound)
			return err
		}
		query, qargs, err := q.listQuery(ctx, st, f, now, cond, slices.Clip(args), after, nil, limit+1, jobCols)
		if err != nil || query == "" {
			return err
		}
		rows, err = q.scanRows(ctx, st, q.sqlOnce(query), qargs)
		return err
	})
	if err != nil {
		return queue.JobPage{}, q.wrap(ctx, err, "listing %s jobs", f.State)
	}
	var page queue.JobPage
	if len(rows) > limit {
		rows = rows[:limit]
		page.Next = o.encode(o.cursorOf(rows[limit-1]))
	} else if edge != nil {
		page.Scanned = scanned
		page.Next = o.encode(*edge)
	}
	page.Jobs = make([]queue.JobInfo, len(rows))
	for i, r := range rows {
		page.Jobs[i] = r.info(now)
	}
	return page, nil
}

// search is ListJobs' payload search: it examines the jobs of the list
// after the cursor a window at a time, the first the page's size (limit+1,
// at least searchWindow; bound, if fewer), then twice the last each time
// up to searchMaxWindow, until the page holds limit+1 matches, no job is
// left, bound jobs were examined, or searchBudget has passed (a window is
// shrunk to what the time left fits at the pace so far). A window costs
// three reads: its jobs' keys, from the index alone (the same bounded
// index scans as a page, merged); the keys and IDs of the jobs in that
// key range whose payload matches; and those jobs whole, by ID. Only the
// matching jobs are read whole, and no derived table holds a payload:
// reading every examined job whole and merging the queues' rows made
// MariaDB (whose derived tables with a BLOB column go to disk) and
// SQLite materialize and sort up to 10,000 wide rows per queue, about
// 1 s over 1,000,000 jobs. When it stopped before the end with the page
// not full, it returns how many jobs it examined and the key of the
// last, so the caller can say "none among these" and continue after them.
func (q *Queue) search(ctx context.Context, st statements, f queue.JobFilter, now int64, cond string, args []any, after *listCursor, limit, bound int) (rows []row, scanned int, edge *listCursor, err error) {
	o := orderOf(f.State)
	match := cond + " AND " + q.d.contains("payload", true)
	margs := append(slices.Clip(args), []byte(f.Search))
	l := q.lister(st, f, now)
	start := time.Now()
	window := min(max(limit+1, searchWindow), bound)
	var ids []string
	for {
		n := min(window, bound-scanned)
		lean, largs, err := l.query(ctx, cond, slices.Clip(args), after, nil, n, o.keyCols())
		if err != nil {
			return nil, 0, nil, err
		}
		if lean == "" {
			break
		}
		keys, err := q.readKeys(ctx, st, q.sqlOnce(lean), largs, o, false)
		if err != nil {
			return nil, 0, nil, err
		}
		if len(keys) == 0 {
			break
		}
		last := keys[len(keys)-1].key
		query, qargs, err := l.query(ctx, match, slices.Clip(margs), after, &last, limit+1-len(ids), o.keyCols()+", id")
		if err != nil {
			return nil, 0, nil, err
		}
		if query != "" {
			got, err := q.readKeys(ctx, st, q.sqlOnce(query), qargs, o, true)
			if err != nil {
				return nil, 0, nil, err
			}
			for _, k := range got {
				ids = append(ids, k.id)
			}
		}
		scanned += len(keys)
		if len(ids) > limit || len(keys) < n {
			scanned = 0 // a full page, or every candidate seen
			break
		}
		after = &last
		// The next window is twice the last, or as many jobs as the
		// time left fits at the pace so far; too few to be worth a
		// window, and the search stops here.
		spent := time.Since(start)
		fit := int64(bound - scanned)
		if spent > 0 {
			fit = min(fit, int64(q.searchBudget-spent)*int64(scanned)/int64(spent))
		}
		if scanned >= bound || fit < searchWindow/2 {
			edge = after
			break
		}
		window = min(2*window, searchMaxWindow, int(fit))
	}
	if edge == nil {
		scanned = 0
	}
	if rows, err = q.rowsByID(ctx, st, ids); err != nil {
		return nil, 0, nil, err
	}
	return rows, scanned, edge, nil
}

// keyed is a job's key in a list order, and its ID when read.
type keyed struct {
	key listCursor
	id  string
}

// readKeys runs a query of o's key columns (and id, withID) and returns
// every row's key.
func (q *Queue) readKeys(ctx context.Context, st statements, query string, args []any, o listOrder, withID bool) ([]keyed, error) {
	rs, err := st.Query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	var out []keyed
	for rs.Next() {
		var k keyed
		dest := o.dest(&k.key)
		if withID {
			dest = append(dest, &k.id)
		}
		if err := rs.Scan(dest...); err != nil {
			return nil, err
		}
		out = append(out, k)
	}
	return out, rs.Err()
}

// rowsByID reads the jobs ids whole, in the order of ids; a job deleted
// since its ID was read is left out.
func (q *Queue) rowsByID(ctx context.Context, st statements, ids []string) ([]row, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	query, args, err := q.stmtIn(qJobsByID, ids)
	if err != nil {
		return nil, err
	}
	got, err := q.scanRows(ctx, st, query, args)
	if err != nil {
		return nil, err
	}
	byID := make(map[string]row, len(got))
	for _, r := range got {
		byID[r.job.ID] = r
	}
	out := make([]row, 0, len(ids))
	for _, id := range ids {
		if r, ok := byID[id]; ok {
			out = append(out, r)
		}
	}
	return out, nil
}

// filterCond turns f's state, name and tag into a condition on {jobs}
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
		return "SELECT " + cols + " FROM {jobs} WHERE " + c + " ORDER BY " + o.sql() + " LIMIT ?", append(a, n), nil
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
			sub = []string{fmt.Sprintf("SELECT * FROM (SELECT %s FROM {jobs} WHERE queue = ? AND %s ORDER BY %s LIMIT ?) b%d", cols, c, o.sql(), i)}
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
		return []string{fmt.Sprintf("SELECT * FROM (SELECT %s FROM {jobs} WHERE queue = ? AND %s ORDER BY %s LIMIT ?) b%d", cols, c, o.sql(), i)},
			append(append([]any{name}, a...), n), nil
	}
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
		parts = append(parts, fmt.Sprintf("SELECT * FROM (SELECT %s FROM {jobs} WHERE queue = ? AND priority = ? AND %s ORDER BY run_at, seq LIMIT ?) b%d_%d", cols, c, i, k))
		all = append(append(append(append(all, name, prio), targs...), args...), n)
	}
	return parts, all, nil
}

// listOrder is the order of a list of jobs, the order of the index that
// serves it, and the form of its keyset cursor.
type listOrder int

const (
	// byClaim: priority (highest first), run time, insertion: the claim
	// index's order, for ready, scheduled and running jobs. The cursor's
	// run time is the job's AvailableAt, which every statement that
	// writes run_at sets to the same value.
	byClaim listOrder = iota
	// byFinish: when the job finished (finished_at: dead-lettered,
	// acked, cancelled), newest first, then insertion, newest first: the
	// list index's order (state, queue, finished_at, seq), for dead,
	// done and cancelled jobs.
	byFinish
)

// listCursor is the key of the last job of a page, in its order: prio
// and at (run_at) for byClaim, at (finished_at) for byFinish, and seq.
type listCursor struct{ prio, at, seq int64 }

func orderOf(s queue.JobState) listOrder {
	switch s {
	case queue.StateDead, queue.StateDone, queue.StateCancelled:
		return byFinish
	}
	return byClaim
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

// dest is the scan destinations of keyCols into c.
func (o listOrder) dest(c *listCursor) []any {
	if o == byFinish {
		return []any{&c.at, &c.seq}
	}
	return []any{&c.prio, &c.at, &c.seq}
}

// cursorOf is the key of r in the order.
func (o listOrder) cursorOf(r row) listCursor {
	if o == byFinish {
		return listCursor{at: r.finishedAt, seq: r.seq}
	}
	return listCursor{prio: int64(r.job.Priority), at: micros(r.job.AvailableAt), seq: r.seq}
}

// encode writes c as the page's Next: the key's numbers after a letter
// naming the order.
func (o listOrder) encode(c listCursor) string {
	if o == byFinish {
		return "f" + strconv.FormatInt(c.at, 10) + "." + strconv.FormatInt(c.seq, 10)
	}
	return "c" + strconv.FormatInt(c.prio, 10) + "." + strconv.FormatInt(c.at, 10) + "." + strconv.FormatInt(c.seq, 10)
}

// decode reads a cursor encode wrote for this order.
func (o listOrder) decode(s string) (listCursor, error) {
	var c listCursor
	prefix, n := "c", 3
	if o == byFinish {
		prefix, n = "f", 2
	}
	rest, ok := strings.CutPrefix(s, prefix)
	parts := strings.Split(rest, ".")
	if !ok || len(parts) != n {
		return c, queue.ErrBadCursor
	}
	dest := o.dest(&c)
	for k, p := range parts {
		v, err := strconv.ParseInt(p, 10, 64)
		if err != nil {
			return c, queue.ErrBadCursor
		}
		*dest[k].(*int64) = v
	}
	return c, nil
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

// inspectRead runs the reads of one inspection call through the dialect
// (see dialect.inspectRead); a timeout > 0 bounds the call's context.
func (q *Queue) inspectRead(ctx context.Context, timeout time.Duration, listing bool, fn func(st statements) error) error {
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	return q.d.inspectRead(ctx, q, timeout, listing, fn)
}

// scanRows runs a query of jobCols on st and scans every row.
func (q *Queue) scanRows(ctx context.Context, st statements, query string, args []any) ([]row, error) {
	rs, err := st.Query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	var out []row
	js := newJobScanner() // every dialect's scan is scanExpiry
	for rs.Next() {
		r, err := js.scan(rs)
		if err != nil {
			return nil, err
		}
		q.logDecode(r)
		out = append(out, r)
	}
	return out, rs.Err()
}

// GetJob returns the job id in whatever state it is, or ErrNotFound.
func (q *Queue) GetJob(ctx context.Context, id string) (queue.JobInfo, error) {
	if err := q.use(ctx); err != nil {
		return queue.JobInfo{}, err
	}
	var (
		r       row
		started int64
		worker  string
		history sql.NullString
		found   bool
	)
	err := func() error {
		rs, err := q.readDB().QueryContext(ctx, q.stmt(qGetJob), id)
		if err != nil {
			return err
		}
		defer rs.Close()
		if rs.Next() {
			if r, err = q.d.scan(rs, &started, &worker, &history); err != nil {
				return err
			}
			q.logDecode(r)
			found = true
		}
		return rs.Err()
	}()
	if err != nil {
		return queue.JobInfo{}, q.wrap(ctx, err, "reading job %s", id)
	}
	if !found {
		return queue.JobInfo{}, fmt.Errorf("sqlqueue: reading job %s: %w", id, queue.ErrNotFound)
	}
	info := r.info(micros(time.Now()))
	withAttempts(&info, started, worker, history)
	return info, nil
}

// Pause makes Reserve skip the jobs of queueName, in every process that
// shares the database, until Resume. Pausing a paused queue is a no-op.
func (q *Queue) Pause(ctx context.Context, queueName string) error {
	if err := q.use(ctx); err != nil {
		return err
	}
	_, err := q.db.ExecContext(ctx, q.stmt(qPause), queueName, micros(time.Now()))
	return q.wrap(ctx, err, "pausing queue %s", queueName)
}

// Resume lets Reserve take the jobs of queueName again. Resuming a queue
// that is not paused is a no-op.
func (q *Queue) Resume(ctx context.Context, queueName string) error {
	if err := q.use(ctx); err != nil {
		return err
	}
	if _, err := q.db.ExecContext(ctx, q.stmt(qResume), queueName); err != nil {
		return q.wrap(ctx, err, "resuming queue %s", queueName)
	}
	q.wake.signal()
	return nil
}

// Paused lists the paused queues, sorted.
func (q *Queue) Paused(ctx context.Context) ([]string, error) {
	if err := q.use(ctx); err != nil {
		return nil, err
	}
	names, err := queryStrings(ctx, stmts(q.readDB()), q.stmt(qPausedSorted))
	if err != nil {
		return nil, q.wrap(ctx, err, "listing paused queues")
	}
	return names, nil
}
