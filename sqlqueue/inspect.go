package sqlqueue

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	queue "github.com/meridianjobs/meridian/queue/driver"
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
	// searchContinueWindow is the first window of a search that goes on
	// after a cursor: the calls before it found too few matches, and a
	// call that started again from searchWindow spent most of its budget
	// on small windows (MariaDB, 2M jobs, load 26: 408,000 jobs examined
	// in 3 minutes of calls, against 1,588,000 starting at 1,000).
	searchContinueWindow = 1000
	statsWindow          = time.Hour // QueueStats' throughput window
	defaultPage          = 50
	maxPage              = 500
	maxStatsQueues       = 1000
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
	type sum struct{ processed, failed, runtimeTotal, runtimeMax, waitTotal int64 }
	sums := map[string]sum{}
	recent := map[string]int64{}
	for rs.Next() {
		var name string
		var a sum
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
// or 1,000 when it goes on after a cursor; f.Scan, if fewer), so a page
// answers in about that time on every dialect (see search). Its reads run at most two seconds (on PostgreSQL
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
	search, err := queue.ParseSearch(f.Search)
	if err != nil {
		return queue.JobPage{}, fmt.Errorf("sqlqueue: listing jobs: %w", err)
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
			rows, scanned, edge, err = q.search(ctx, st, f, search, now, cond, slices.Clip(args), after, limit, bound)
			return err
		}
		query, qargs, err := q.listQuery(ctx, st, f, now, cond, slices.Clip(args), after, nil, limit+1, jobCols)
		if err != nil || query == "" {
			return err
		}
		rows, err = q.scanRows(ctx, st, q.rebind(query), qargs)
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
// at least searchWindow, or searchContinueWindow after a cursor; bound,
// if fewer), then twice the last each time
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
//
// The substrings of s are tested in the store (contains); its field
// filters in Go (queue.Search.Match), on the payloads of the window's
// jobs that hold the substrings, read with the second read: no dialect's
// JSON functions are safe on a payload that is not JSON (PostgreSQL's
// cast fails the whole statement), and the same code gives every store
// the same meaning of a field filter.
func (q *Queue) search(ctx context.Context, st statements, f queue.JobFilter, s queue.Search, now int64, cond string, args []any, after *listCursor, limit, bound int) (rows []row, scanned int, edge *listCursor, err error) {
	o := orderOf(f.State)
	match, margs := q.searchCond(cond, args, s.Text)
	l := q.lister(st, f, now)
	start := time.Now()
	window := min(max(limit+1, searchWindow), bound)
	if after != nil {
		window = min(max(window, searchContinueWindow), bound)
	}
	icond, iargs, indexed := "", []any(nil), false
	if text := longest(s.Text); text != "" {
		icond, iargs, indexed = q.d.indexedMatch(q.t, text)
	}
	if indexed {
		if indexed, err = q.searchIndexOn(ctx, st); err != nil {
			return nil, 0, nil, err
		}
	}
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
		keys, err := q.readKeys(ctx, st, q.rebind(lean), largs, o, false, false)
		if err != nil {
			return nil, 0, nil, err
		}
		if len(keys) == 0 {
			break
		}
		last := keys[len(keys)-1].key
		// The window's matches, or with field filters every job of it
		// that holds the substrings, with its payload.
		want, cols := limit+1-len(ids), o.keyCols()+", id"
		if len(s.Fields) > 0 {
			want, cols = len(keys), cols+", payload"
		}
		query, qargs, err := l.query(ctx, match, slices.Clip(margs), after, &last, want, cols)
		if err != nil {
			return nil, 0, nil, err
		}
		if query != "" {
			got, err := q.readKeys(ctx, st, q.rebind(query), qargs, o, true, len(s.Fields) > 0)
			if err != nil {
				return nil, 0, nil, err
			}
			for _, k := range got {
				if len(ids) <= limit && (len(s.Fields) == 0 || s.Match(k.payload)) {
					ids = append(ids, k.id)
				}
			}
		}
		scanned += len(keys)
		if len(ids) > limit || len(keys) < n {
			scanned = 0 // a full page, or every candidate seen
			break
		}
		after = &last
		if indexed {
			// The first window did not fill the page: the index finds
			// the rest of it, however deep, unless the matches after
			// the window are too many to read whole (then the scan's
			// next windows find them soon).
			more, complete, err := q.searchByIndex(ctx, st, f, s, o, icond, iargs, cond, args, after, limit+1-len(ids))
			if err != nil {
				return nil, 0, nil, err
			}
			if complete {
				ids, scanned = append(ids, more...), 0
				break
			}
			indexed = false
		}
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

// keyed is a job's key in a list order, and its ID and payload when
// read.
type keyed struct {
	key     listCursor
	id      string
	payload []byte
}

// readKeys runs a query of o's key columns (and id, withID, then
// payload, withPayload) and returns every row's key.
func (q *Queue) readKeys(ctx context.Context, st statements, query string, args []any, o listOrder, withID, withPayload bool) ([]keyed, error) {
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
		if withPayload {
			dest = append(dest, &k.payload)
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
	js := newJobScanner()
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
			if r, err = scanJob(rs, &started, &worker, &history); err != nil {
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

// longest is the longest of texts ("" when there is none): the one a
// search index narrows the candidates by most.
func longest(texts []string) string {
	var l string
	for _, t := range texts {
		if len(t) > len(l) {
			l = t
		}
	}
	return l
}
