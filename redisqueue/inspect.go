package redisqueue

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// Bounds of inspection.
const (
	defaultPage = 50  // ListJobs' page without a Limit
	maxPage     = 500 // and its largest
	// searchRows is the most jobs a payload search examines per page
	// (f.Scan, if smaller), and searchBudget the time after which it
	// starts no new chunk once it has examined one (see ListJobs).
	searchRows   = 10000
	searchBudget = 40 * time.Millisecond
	statsWindow  = time.Hour // QueueStats' throughput window
)

// jobInfo reads the inspection view of a job from the values of HMGET
// jobKey JF... st dd, at now (ms, the server's clock): the state follows
// the time, so a scheduled job whose time has come and a leased one whose
// lease expired are ready, as Reserve would take them.
//
// UpdatedAt is the latest of the times the job keeps: CreatedAt, its
// AvailableAt once passed (when it was pushed, retried or became due)
// and FinishedAt. The store records no reservation time, so a running
// job's UpdatedAt is when it became ready.
func jobInfo(v []any, now int64) (driver.JobInfo, error) {
	if len(v) != nFields+2 {
		return driver.JobInfo{}, fmt.Errorf("a job read back with %d fields, want %d", len(v), nFields+2)
	}
	j, err := decodeJob(v[:nFields])
	if err != nil {
		return driver.JobInfo{}, err
	}
	st, _ := v[nFields].(string)
	dd, _ := v[nFields+1].(string)
	at := time.UnixMilli(now)
	ji := driver.JobInfo{Job: j, FinishedAt: timeOrZero(dd)}
	switch st {
	case "r":
		ji.State = driver.StateReady
	case "s":
		ji.State = driver.StateScheduled
		if !j.AvailableAt.After(at) {
			ji.State = driver.StateReady
		}
	case "x":
		ji.State = driver.StateReady
		if j.LeaseExpiresAt.After(at) {
			ji.State = driver.StateRunning
		}
	case "d":
		ji.State = driver.StateDead
	case "g":
		ji.State = driver.StateGrouped
	case "w":
		ji.State = driver.StateSequenced
	default:
		return driver.JobInfo{}, fmt.Errorf("job %s is in the unknown state %q", j.ID, st)
	}
	if ji.State != driver.StateRunning {
		ji.LeaseToken, ji.LeaseExpiresAt = "", time.Time{}
	}
	ji.UpdatedAt = j.CreatedAt
	if !j.AvailableAt.After(at) && j.AvailableAt.After(ji.UpdatedAt) {
		ji.UpdatedAt = j.AvailableAt
	}
	if ji.FinishedAt.After(ji.UpdatedAt) {
		ji.UpdatedAt = ji.FinishedAt
	}
	return ji, nil
}

// ListJobs returns one page of jobs in f.State matching f, by keyset in
// the state's order: ready, scheduled and running jobs in claim order
// (priority, then available-at, then insertion), dead letters by the
// time they died, newest first. Done and cancelled jobs are not kept, so
// their pages are empty. Limit defaults to 50 and is capped at 500.
//
// Name, tag and payload filters are tested in a script on the server, a
// chunk of at most 250 jobs per call, so only the jobs that match
// travel. A payload search examines at most 10,000 jobs per page (f.Scan,
// if smaller) after the cursor, and starts no new chunk after 40 ms once
// it has examined one: when it stops at either bound before the page is
// full, JobPage.Scanned says how many jobs it examined and Next
// continues after the last of them. Redis has no index of payloads, so
// that bound is what keeps a search from reading every job.
//
// A list of running jobs reads at most 5,000 of a queue's running jobs
// (sorted in claim order on the server), and a list of ready jobs at
// most 1,000 of a queue's jobs whose lease expired and that no
// reservation has moved back yet.
func (q *Queue) ListJobs(ctx context.Context, f driver.JobFilter) (driver.JobPage, error) {
	doing := fmt.Sprintf("listing %s jobs", f.State)
	if err := ctxErr(ctx, doing); err != nil {
		return driver.JobPage{}, err
	}
	limit := f.Limit
	if limit <= 0 {
		limit = defaultPage
	}
	limit = min(limit, maxPage)
	scan := 0
	if f.Search != "" {
		scan = searchRows
		if f.Scan > 0 {
			scan = min(f.Scan, searchRows)
		}
	}
	it, err := q.matching(f, scan)
	if err != nil {
		return driver.JobPage{}, err
	}
	it.want = limit + 1
	if f.Search != "" {
		it.until = time.Now().Add(searchBudget)
	}
	var page driver.JobPage
	for len(page.Jobs) < limit && it.Next(ctx) {
		page.Jobs = append(page.Jobs, it.Job())
	}
	if len(page.Jobs) == limit {
		next := it.Cursor()
		if it.Next(ctx) {
			page.Next = next
		}
	}
	if err := it.Err(); err != nil {
		return driver.JobPage{}, err
	}
	if page.Next == "" && it.Bounded() {
		page.Scanned, page.Next = it.Examined(), it.Cursor()
	}
	return page, nil
}

// GetJob returns the job id in its state now, or an error matching
// queue.ErrNotFound. Done and cancelled jobs are deleted, so they are not
// found.
func (q *Queue) GetJob(ctx context.Context, id string) (driver.JobInfo, error) {
	doing := "reading job " + id
	if err := ctxErr(ctx, doing); err != nil {
		return driver.JobInfo{}, err
	}
	bases, err := q.idBases(ctx, id)
	if err != nil {
		return driver.JobInfo{}, wrap(doing, err)
	}
	var out []any
	for _, b := range bases {
		if out, err = getJobScript.RunRO(ctx, q.rdb, []string{q.idsKey(b)}, id).Slice(); err != nil {
			return driver.JobInfo{}, wrap(doing, err)
		}
		if len(out) >= 2 {
			break
		}
	}
	if len(out) < 2 {
		return driver.JobInfo{}, fmt.Errorf("redisqueue: %s: %w", doing, queue.ErrNotFound)
	}
	now, _ := strconv.ParseInt(fmt.Sprint(out[0]), 10, 64)
	row, _ := out[1].([]any)
	ji, err := jobInfo(row, now)
	if err != nil {
		return driver.JobInfo{}, wrap(doing, err)
	}
	if len(out) > 2 {
		ji.Actions = decodeActions(out[2])
	}
	return ji, nil
}

// Counts returns the jobs of each queue by state, exact, one entry per
// queue holding jobs, sorted by name. They are the sizes of the state
// sets, which the scripts that change a job's state change with it, read
// in one script for every queue (one snapshot): a few O(1) or O(log n)
// reads per queue, whatever the number of jobs. Scheduled jobs whose
// time has come and running ones whose lease expired count as ready.
// Done and Cancelled are 0: those jobs are not kept. Grouped is the size
// of the queue's set of group members, Sequenced that of its set of
// waiting sequence members.
func (q *Queue) Counts(ctx context.Context) ([]driver.QueueCounts, error) {
	const doing = "counting jobs"
	if err := ctxErr(ctx, doing); err != nil {
		return nil, err
	}
	all, err := q.counts(ctx)
	if err != nil {
		return nil, wrap(doing, err)
	}
	out := all[:0]
	for _, c := range all {
		if c.Pending > 0 || c.Dead > 0 || c.Grouped > 0 || c.Sequenced > 0 {
			out = append(out, c)
		}
	}
	return out, nil
}

// counts reads the counts of every queue pushed to, sorted by name.
func (q *Queue) counts(ctx context.Context) ([]driver.QueueCounts, error) {
	names, err := q.names(ctx, "")
	if err != nil || len(names) == 0 {
		return nil, err
	}
	bases := make([]string, len(names))
	for i, n := range names {
		bases[i] = q.base(n)
	}
	out, err := q.perQueueRO(ctx, countsScript, bases)
	if err != nil {
		return nil, err
	}
	if len(out) != len(names) {
		return nil, fmt.Errorf("the script answered %d counts for %d queues", len(out), len(names))
	}
	counts := make([]driver.QueueCounts, len(names))
	for i, name := range names {
		v, _ := out[i].([]any)
		if len(v) != 8 {
			return nil, fmt.Errorf("the script answered %d counts for queue %s, want 8", len(v), name)
		}
		n := func(k int) int64 { x, _ := v[k].(int64); return x }
		ready, sched, run, later, live, dead, grouped, sequenced := n(0), n(1), n(2), n(3), n(4), n(5), n(6), n(7)
		counts[i] = driver.QueueCounts{
			Queue:     name,
			Pending:   ready + sched + run,
			Ready:     driver.Count{N: ready + sched - later + run - live},
			Scheduled: driver.Count{N: later},
			Running:   driver.Count{N: live},
			Dead:      dead,
			Grouped:   grouped,
			Sequenced: sequenced,
		}
	}
	return counts, nil
}

// QueueStats returns one entry per queue with jobs, a pause or metrics in
// the last hour, sorted by name: the counts by state of Counts, whether
// the queue is paused (see Pause), and the
// throughput, runtime and wait of the last hour from the metrics every
// process writes (see ObserveRun), with this process's buffered ones
// written first.
func (q *Queue) QueueStats(ctx context.Context) ([]driver.QueueStats, error) {
	const doing = "reading queue stats"
	if err := ctxErr(ctx, doing); err != nil {
		return nil, err
	}
	q.flushMetricsLogged(ctx)
	counts, err := q.counts(ctx)
	if err != nil {
		return nil, wrap(doing, err)
	}
	paused, err := q.Paused(ctx)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	points, err := q.metrics(ctx, now.Add(-statsWindow), now)
	if err != nil {
		return nil, wrap(doing, err)
	}
	byName := map[string]*driver.QueueStats{}
	entry := func(name string) *driver.QueueStats {
		s := byName[name]
		if s == nil {
			s = &driver.QueueStats{Queue: name, Window: statsWindow}
			byName[name] = s
		}
		return s
	}
	for _, c := range counts {
		if c.Pending == 0 && c.Dead == 0 {
			continue
		}
		s := entry(c.Queue)
		s.Ready, s.Scheduled, s.Running, s.Dead = c.Ready, c.Scheduled, c.Running, driver.Count{N: c.Dead}
	}
	for _, name := range paused {
		entry(name).Paused = true
	}
	type sums struct{ runs, runtime, wait, recent int64 }
	agg := map[string]*sums{}
	recentFrom := now.Add(-driver.RateWindow).Truncate(time.Minute)
	for _, p := range points {
		s := entry(p.Queue)
		a := agg[p.Queue]
		if a == nil {
			a = &sums{}
			agg[p.Queue] = a
		}
		s.Processed += p.Processed
		s.Failed += p.Failed
		s.MaxRuntime = max(s.MaxRuntime, p.MaxRuntime)
		a.runs += p.Processed + p.Failed
		a.runtime += int64(p.TotalRuntime)
		a.wait += int64(p.TotalWait)
		if !p.Minute.Before(recentFrom) {
			a.recent += p.Processed
		}
	}
	for name, a := range agg {
		s := byName[name]
		s.JobsPerMinute = driver.PerMinute(a.recent, now)
		if a.runs > 0 {
			s.AvgRuntime = time.Duration(a.runtime / a.runs)
			s.AvgWait = time.Duration(a.wait / a.runs)
		}
	}
	out := make([]driver.QueueStats, 0, len(byName))
	for _, s := range byName {
		out = append(out, *s)
	}
	slices.SortFunc(out, func(a, b driver.QueueStats) int { return cmp.Compare(a.Queue, b.Queue) })
	return out, nil
}

// DeadSince counts the dead letters of every queue that died at or after
// since: one ZCOUNT per queue on the dead set, which is scored by that
// time, so the count is exact.
func (q *Queue) DeadSince(ctx context.Context, since time.Time) (driver.Count, error) {
	const doing = "counting dead letters"
	if err := ctxErr(ctx, doing); err != nil {
		return driver.Count{}, err
	}
	names, err := q.names(ctx, "")
	if err != nil {
		return driver.Count{}, wrap(doing, err)
	}
	if len(names) == 0 {
		return driver.Count{}, nil
	}
	from := strconv.FormatInt(millis(since), 10)
	pipe := q.rdb.Pipeline()
	cmds := make([]*redis.IntCmd, len(names))
	for i, n := range names {
		cmds[i] = pipe.ZCount(ctx, q.base(n)+":dead", from, "+inf")
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return driver.Count{}, wrap(doing, err)
	}
	var total int64
	for _, c := range cmds {
		total += c.Val()
	}
	return driver.Count{N: total}, nil
}

// OldestReady returns, for each queue with ready jobs, the earliest
// AvailableAt of its ready jobs (see oldestScript): one script for every
// queue, a few reads per queue and priority.
func (q *Queue) OldestReady(ctx context.Context) (map[string]time.Time, error) {
	const doing = "reading the oldest ready jobs"
	if err := ctxErr(ctx, doing); err != nil {
		return nil, err
	}
	names, err := q.names(ctx, "")
	if err != nil {
		return nil, wrap(doing, err)
	}
	out := map[string]time.Time{}
	if len(names) == 0 {
		return out, nil
	}
	bases := make([]string, len(names))
	for i, n := range names {
		bases[i] = q.base(n)
	}
	got, err := q.perQueueRO(ctx, oldestScript, bases, expiredCap)
	if err != nil {
		return nil, wrap(doing, err)
	}
	for i, v := range got {
		if s, _ := v.(string); s != "" && i < len(names) {
			out[names[i]] = timeOrZero(s)
		}
	}
	return out, nil
}
