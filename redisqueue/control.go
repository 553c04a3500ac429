package redisqueue

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// The Controller ability: pause and resume, cancel, and bulk actions.

// The cancel log ({prefix}:cancels) keeps the leases of jobs cancelled
// while running, for CancelledSince: for cancelKeep, and at most
// cancelLogCap of them (the newest). A Worker asks for the cancels since
// its previous poll, so it needs only the last few seconds; the extender
// looks back one lease.
const (
	cancelKeep   = 24 * time.Hour
	cancelLogCap = 10000
)

// pausedKey and cancelsKey are the prefix's set of paused queue names and
// its cancel log.
func (q *Queue) pausedKey() string  { return "{" + q.prefix + "}:paused" }
func (q *Queue) cancelsKey() string { return "{" + q.prefix + "}:cancels" }

// Pause makes Reserve skip queueName's jobs until Resume, in every
// process that shares the Redis and the prefix (see driver.Controller).
// The reservation script checks the pause in the same step that leases,
// so no job is leased from a queue after Pause returned. Jobs already
// leased run on; pushes are stored as usual.
func (q *Queue) Pause(ctx context.Context, queueName string) error {
	return q.setPaused(ctx, "pausing queue", queueName, true)
}

// Resume undoes Pause and wakes the Waits on the queue.
func (q *Queue) Resume(ctx context.Context, queueName string) error {
	return q.setPaused(ctx, "resuming queue", queueName, false)
}

func (q *Queue) setPaused(ctx context.Context, doing, queueName string, pause bool) error {
	if queueName == "" {
		queueName = queue.DefaultQueue
	}
	doing += " " + queueName
	if err := ctxErr(ctx, doing); err != nil {
		return err
	}
	flag := "0"
	if pause {
		flag = "1"
	}
	if q.cluster {
		return wrap(doing, q.setPausedCluster(ctx, queueName, pause))
	}
	err := pauseScript.Run(ctx, q.rdb, []string{q.queues, q.pausedKey(), q.base(queueName)}, queueName, flag, q.wake).Err()
	return wrap(doing, err)
}

// setPausedCluster is setPaused on a Cluster: the queue registered, then
// <base>:paused set or deleted (one command, in the queue's slot), and a
// resume that ended a pause published. The registry is all Paused reads
// there besides the queues' own keys, so no set of paused names can
// disagree with them.
func (q *Queue) setPausedCluster(ctx context.Context, name string, pause bool) error {
	if err := q.register(ctx, name); err != nil {
		return err
	}
	key := q.base(name) + ":paused"
	if pause {
		return q.rdb.Set(ctx, key, "1", 0).Err()
	}
	was, err := q.rdb.Del(ctx, key).Result()
	if err != nil || was == 0 {
		return err
	}
	return q.rdb.Publish(ctx, q.wake, name).Err()
}

// Paused lists the paused queues, sorted by name.
func (q *Queue) Paused(ctx context.Context) ([]string, error) {
	const doing = "listing paused queues"
	if err := ctxErr(ctx, doing); err != nil {
		return nil, err
	}
	if q.cluster {
		names, err := q.pausedCluster(ctx)
		return names, wrap(doing, err)
	}
	names, err := q.rdb.SMembers(ctx, q.pausedKey()).Result()
	if err != nil {
		return nil, wrap(doing, err)
	}
	slices.Sort(names)
	return names, nil
}

// pausedCluster is Paused on a Cluster: one EXISTS of <base>:paused per
// queue of the registry, in one pipeline.
func (q *Queue) pausedCluster(ctx context.Context) ([]string, error) {
	names, err := q.names(ctx, "")
	if err != nil || len(names) == 0 {
		return nil, err
	}
	pipe := q.rdb.Pipeline()
	cmds := make([]*redis.IntCmd, len(names))
	for i, n := range names {
		cmds[i] = pipe.Exists(ctx, q.base(n)+":paused")
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, err
	}
	var out []string
	for i, c := range cmds {
		if c.Val() > 0 {
			out = append(out, names[i])
		}
	}
	return out, nil
}

// Cancel cancels the active job id in one script (see
// driver.Controller): a ready or scheduled job is taken off its set, a
// running one off the leased set with its lease written to the cancel
// log, where its Worker finds it (CancelledSince, at the Worker's next
// cancel poll); either way its unique key is freed and the job is
// deleted, since this store keeps no finished jobs, and counted in the
// queue's cancelled total. So a second Cancel of the same ID returns
// ErrNotFound, as does a cancel of a done job; a dead letter's returns
// ErrFinished. A batch member is counted cancelled in its batch through
// its queue's outbox (scripts_batch.go), settled before Cancel returns.
func (q *Queue) Cancel(ctx context.Context, id string) (driver.JobState, error) {
	doing := "cancelling job " + id
	if err := ctxErr(ctx, doing); err != nil {
		return "", err
	}
	bases := []string{""}
	if q.cluster {
		names, err := q.locate(ctx, id)
		if err != nil {
			return "", wrap(doing, err)
		}
		bases = bases[:0]
		for _, n := range names {
			bases = append(bases, q.base(n))
		}
	}
	var code int64
	var was string
	var out []any
	for _, b := range bases {
		// On a Cluster an ID is unique per queue: the first queue (by
		// name) where it is active has its job cancelled.
		var err error
		out, err = cancelScript.Run(ctx, q.rdb, []string{q.idsKey(b), q.clogKey(b)},
			id, time.Now().UnixMilli(), cancelKeep.Milliseconds(), cancelLogCap, q.wake).Slice()
		if err != nil {
			return "", wrap(doing, err)
		}
		if len(out) != 3 {
			return "", fmt.Errorf("redisqueue: %s: the script answered %d values, want 3", doing, len(out))
		}
		c, _ := out[0].(int64)
		if code == 0 || c == 1 {
			code = c
			was, _ = out[1].(string)
		}
		if c == 1 {
			break
		}
	}
	switch code {
	case 1:
		if settle, _ := out[2].(string); settle != "" {
			// A batch member: its batch counts it before Cancel returns,
			// or, should that fail, at a later reservation's sweep.
			q.settleLogged(ctx, []string{settle})
		}
		return driver.JobState(was), nil
	case 2:
		return "", fmt.Errorf("redisqueue: %s: %w", doing, queue.ErrFinished)
	}
	return "", fmt.Errorf("redisqueue: %s: %w", doing, queue.ErrNotFound)
}

// CancelledSince returns the leases of jobs cancelled while running at or
// after since, by the cancelling process's clock (see driver.Controller):
// one range read of the cancel log, which keeps the last day's cancels,
// at most 10,000.
func (q *Queue) CancelledSince(ctx context.Context, since time.Time) ([]driver.Lease, error) {
	const doing = "listing cancelled jobs"
	if err := ctxErr(ctx, doing); err != nil {
		return nil, err
	}
	by := &redis.ZRangeBy{Min: strconv.FormatInt(millis(since), 10), Max: "+inf"}
	var members []string
	if q.cluster {
		// One log per queue (cluster.go), read in one pipeline.
		names, err := q.names(ctx, "")
		if err != nil {
			return nil, wrap(doing, err)
		}
		if len(names) == 0 {
			return nil, nil
		}
		pipe := q.rdb.Pipeline()
		cmds := make([]*redis.StringSliceCmd, len(names))
		for i, n := range names {
			cmds[i] = pipe.ZRangeByScore(ctx, q.clogKey(q.base(n)), by)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return nil, wrap(doing, err)
		}
		for _, c := range cmds {
			members = append(members, c.Val()...)
		}
	} else {
		var err error
		if members, err = q.rdb.ZRangeByScore(ctx, q.cancelsKey(), by).Result(); err != nil {
			return nil, wrap(doing, err)
		}
	}
	out := make([]driver.Lease, 0, len(members))
	for _, m := range members {
		// Job IDs hold no NUL (driver.Validate), so the first one ends
		// the ID.
		if id, tok, ok := strings.Cut(m, "\x00"); ok {
			out = append(out, driver.Lease{JobID: id, Token: tok})
		}
	}
	return out, nil
}

// bulkChunk is how many jobs one bulkScript call changes.
const bulkChunk = 500

// ActOn applies a to at most limit jobs that match f, in ListJobs' order
// (see driver.Controller): it walks the matching jobs as ListJobs does
// (with a payload search, a chunk of examined jobs at a time, on until
// limit jobs changed or none are left) and changes them 500 per script.
// The script acts on a job only while it is in a state a acts on (dead
// for retry and forget; ready, scheduled or running for cancel), so jobs
// that moved on meanwhile are skipped, as are dead letters whose unique
// key another active job holds. A cancel is Cancel's, job by job within
// the script: running jobs' leases go to the cancel log, and batch
// members are counted in their batches through their queues' outboxes,
// settled after each script.
func (q *Queue) ActOn(ctx context.Context, f driver.JobFilter, a driver.BulkAction, limit int, rec driver.Action) (int, error) {
	if err := driver.CheckBulk(a, f.State, limit); err != nil {
		return 0, err
	}
	doing := fmt.Sprintf("bulk %s of %s jobs", a, f.State)
	if err := ctxErr(ctx, doing); err != nil {
		return 0, err
	}
	f.After, f.Limit, f.Scan = "", 0, 0
	it, err := q.matching(f, 0)
	if err != nil {
		return 0, err
	}
	it.want = min(limit, bulkChunk)
	total := 0
	ids := make([]string, 0, min(limit, bulkChunk))
	var names []string // the queue of each of ids
	for total < limit {
		ids, names = ids[:0], names[:0]
		for len(ids) < min(bulkChunk, limit-total) && it.Next(ctx) {
			ids = append(ids, it.Job().ID)
			names = append(names, it.Job().Queue)
		}
		if len(ids) == 0 {
			break
		}
		if !q.cluster {
			n, err := q.actOnIDs(ctx, a, "", ids, rec)
			total += n
			if err != nil {
				return total, wrap(doing, err)
			}
			continue
		}
		qs, groups := byQueue(len(ids), func(i int) string { return names[i] })
		for _, qn := range qs {
			part := make([]string, len(groups[qn]))
			for k, i := range groups[qn] {
				part[k] = ids[i]
			}
			n, err := q.actOnIDs(ctx, a, q.base(qn), part, rec)
			total += n
			if err != nil {
				return total, wrap(doing, err)
			}
		}
	}
	return total, it.Err()
}

// actOnIDs runs bulkScript on ids (on a Cluster, all of the queue of
// base), settles the outboxes of the queues whose batch members it
// cancelled, and reports how many jobs it changed. A retry with
// rec.What records rec in each retried job's field ac.
func (q *Queue) actOnIDs(ctx context.Context, a driver.BulkAction, base string, ids []string, rec driver.Action) (int, error) {
	var entry string
	if a == driver.BulkRetry && rec.What != "" {
		at := rec.At
		if at.IsZero() {
			at = time.Now()
		}
		b, _ := json.Marshal(actionEntry{At: at.UnixMilli(), By: rec.By, What: rec.What})
		entry = string(b)
	}
	args := make([]any, 0, 7+len(ids))
	args = append(args, string(a), time.Now().UnixMilli(), cancelKeep.Milliseconds(), cancelLogCap, q.wake, entry, driver.MaxHistory)
	for _, id := range ids {
		args = append(args, id)
	}
	out, err := bulkScript.Run(ctx, q.rdb, []string{q.idsKey(base), q.clogKey(base)}, args...).Slice()
	if err != nil {
		return 0, err
	}
	if len(out) == 0 {
		return 0, fmt.Errorf("the bulk script answered nothing")
	}
	n, _ := out[0].(int64)
	var settle []string
	for _, x := range out[1:] {
		if name, _ := x.(string); name != "" {
			settle = append(settle, name)
		}
	}
	if len(settle) > 0 {
		q.settleLogged(ctx, settle)
	}
	return int(n), nil
}

// CountJobs counts the jobs that match f, exact up to limit (see
// driver.Controller). Without a name, tag or search filter it reads the
// state's count from Counts' one script over the queues' sets (O(1) or
// O(log n) per queue, whatever the number of jobs); with one it walks the
// matching jobs as ListJobs does, up to limit plus one, and a payload
// search examines at most 10,000 jobs (ListJobs' bound), setting More
// when it stopped there.
func (q *Queue) CountJobs(ctx context.Context, f driver.JobFilter, limit int) (driver.Count, error) {
	if limit < 1 {
		return driver.Count{}, fmt.Errorf("redisqueue: counting jobs with limit %d: %w", limit, queue.ErrBulkState)
	}
	doing := fmt.Sprintf("counting %s jobs", f.State)
	if err := ctxErr(ctx, doing); err != nil {
		return driver.Count{}, err
	}
	capped := func(n int64) driver.Count {
		return driver.Count{N: min(n, int64(limit)), More: n > int64(limit)}
	}
	if of := countOf(f.State); of != nil && f.Name == "" && f.Tag == "" && f.Search == "" {
		cs, err := q.counts(ctx)
		if err != nil {
			return driver.Count{}, wrap(doing, err)
		}
		var n int64
		for _, c := range cs {
			if f.Queue == "" || c.Queue == f.Queue {
				n += of(c)
			}
		}
		return capped(n), nil
	}
	f.After, f.Limit, f.Scan = "", 0, 0
	scan := 0
	if f.Search != "" {
		scan = searchRows
	}
	it, err := q.matching(f, scan)
	if err != nil {
		return driver.Count{}, err
	}
	it.want = min(limit+1, bulkChunk)
	var n int64
	for n <= int64(limit) && it.Next(ctx) {
		n++
	}
	if err := it.Err(); err != nil {
		return driver.Count{}, err
	}
	c := capped(n)
	c.More = c.More || it.Bounded()
	return c, nil
}

// countOf returns how to read the count of jobs in state st from a
// queue's QueueCounts, or nil for a state they do not hold.
func countOf(st driver.JobState) func(driver.QueueCounts) int64 {
	switch st {
	case driver.StateReady:
		return func(c driver.QueueCounts) int64 { return c.Ready.N }
	case driver.StateScheduled:
		return func(c driver.QueueCounts) int64 { return c.Scheduled.N }
	case driver.StateRunning:
		return func(c driver.QueueCounts) int64 { return c.Running.N }
	case driver.StateDead:
		return func(c driver.QueueCounts) int64 { return c.Dead }
	case driver.StateGrouped:
		return func(c driver.QueueCounts) int64 { return c.Grouped }
	case driver.StateSequenced:
		return func(c driver.QueueCounts) int64 { return c.Sequenced }
	}
	return nil
}
