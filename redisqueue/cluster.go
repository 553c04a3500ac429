package redisqueue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// On a Redis Cluster (New with a *redis.ClusterClient) every script
// touches the keys of one hash slot: a queue's, a batch's or the
// prefix's. What a standalone server keeps under the prefix's tag beside
// a queue's keys moves into the queue's slot or out of the scripts
// (docs/drivers.md, "Redis Cluster"):
//
//   - the ID index is per queue, <base>:ids, so an ID is unique within
//     its queue; the calls that name a job by ID alone (GetJob, Cancel,
//     RetryDead, ForgetDead) look for it in every queue of the registry;
//   - the registry of queues, {prefix}:queues, is added to before a
//     script that may store a job in a queue runs, outside it (SADD is
//     idempotent; a process killed in between leaves a queue listed
//     with no jobs);
//   - the cancel log is per queue, <base>:cancels, and CancelledSince
//     reads every queue's;
//   - a pause is <base>:paused alone, and Paused reads it for every
//     queue of the registry;
//   - calls over several queues (PushMany, Complete, ExtendMany, the bulk
//     actions) run one script per queue, and reads over several queues
//     (lists, Counts, OldestReady) one script per queue, merged here.
//
// The scripts take the ID index and the registry as keys; on a Cluster
// both are the queue's <base>:ids, and push_one adds to the registry only
// when the two differ.

// idsKey returns the key of the ID index that covers the queue of base.
func (q *Queue) idsKey(base string) string {
	if q.cluster {
		return base + ":ids"
	}
	return q.ids
}

// qsetKey returns the registry of queues a script of base's queue adds
// to: on a Cluster idsKey(base), which tells push_one to add nothing.
func (q *Queue) qsetKey(base string) string {
	if q.cluster {
		return base + ":ids"
	}
	return q.queues
}

// clogKey returns the cancel log a script of base's queue writes.
func (q *Queue) clogKey(base string) string {
	if q.cluster {
		return base + ":cancels"
	}
	return q.cancelsKey()
}

// register adds names to the registry of queues ahead of a script that
// may store jobs in them, on a Cluster (on a standalone server the script
// does it).
func (q *Queue) register(ctx context.Context, names ...string) error {
	if !q.cluster || len(names) == 0 {
		return nil
	}
	m := make([]any, len(names))
	for i, n := range names {
		m[i] = n
	}
	return q.rdb.SAdd(ctx, q.queues, m...).Err()
}

// locate returns the queues whose ID index holds id, sorted by name: on a
// Cluster, one HEXISTS per queue of the registry, in one pipeline (one
// round trip per node).
func (q *Queue) locate(ctx context.Context, id string) ([]string, error) {
	names, err := q.names(ctx, "")
	if err != nil || len(names) == 0 {
		return nil, err
	}
	pipe := q.rdb.Pipeline()
	cmds := make([]*redis.BoolCmd, len(names))
	for i, n := range names {
		cmds[i] = pipe.HExists(ctx, q.base(n)+":ids", id)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, err
	}
	var out []string
	for i, c := range cmds {
		if c.Val() {
			out = append(out, names[i])
		}
	}
	return out, nil
}

// byQueue groups the indexes 0..n-1 by the queue nameOf gives each, the
// queues in order of first appearance.
func byQueue(n int, nameOf func(i int) string) (names []string, groups map[string][]int) {
	groups = map[string][]int{}
	for i := range n {
		name := nameOf(i)
		if _, ok := groups[name]; !ok {
			names = append(names, name)
		}
		groups[name] = append(groups[name], i)
	}
	return names, groups
}

// sortedNames returns the distinct names, sorted.
func sortedNames(names []string) []string {
	out := slices.Clone(names)
	slices.Sort(out)
	return slices.Compact(out)
}

// perQueueRO runs the read-only script s, which answers one value per
// base of KEYS, over bases: in one call on a standalone server, one call
// per queue on a Cluster (in one pipeline, a round trip per node), the
// answers concatenated in bases' order. On a Cluster the queues are then
// not read at one instant.
func (q *Queue) perQueueRO(ctx context.Context, s *redis.Script, bases []string, args ...any) ([]any, error) {
	if !q.cluster {
		return s.RunRO(ctx, q.rdb, bases, args...).Slice()
	}
	var cmds []*redis.Cmd
	for try := 0; ; try++ {
		pipe := q.rdb.Pipeline()
		cmds = make([]*redis.Cmd, len(bases))
		for i, b := range bases {
			cmds[i] = s.EvalShaRO(ctx, pipe, []string{b}, args...)
		}
		_, err := pipe.Exec(ctx)
		if err == nil {
			break
		}
		if try > 0 || !redis.HasErrorPrefix(err, "NOSCRIPT") {
			return nil, err
		}
		// A pipeline does not send the source again on NOSCRIPT: load
		// the script on every master, then run the pipeline again.
		if err := q.loadEverywhere(ctx, s); err != nil {
			return nil, err
		}
	}
	out := make([]any, 0, len(bases))
	for _, c := range cmds {
		v, err := c.Slice()
		if err != nil {
			return nil, err
		}
		out = append(out, v...)
	}
	return out, nil
}

// loadEverywhere loads s on every master of the Cluster.
func (q *Queue) loadEverywhere(ctx context.Context, s *redis.Script) error {
	cc, ok := q.rdb.(*redis.ClusterClient)
	if !ok {
		return nil
	}
	return cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
		return s.Load(ctx, c).Err()
	})
}

// before reports whether key a comes before key b in the list order of
// kind: claim order ascending, or (kind "fin") newest first. Members
// compare by bytes, as Redis orders them.
func before(kind string, a, b listCursor) bool {
	if kind == "fin" {
		if a.score != b.score {
			return a.score > b.score
		}
		return a.member > b.member
	}
	if a.score != b.score {
		return a.score < b.score
	}
	return a.member < b.member
}

// readMerged is read on a Cluster over several queues: listScript once
// per queue with the same cursor, want and budget (in one pipeline),
// each answering every job it examined, merged here into what one script
// over all the queues would have answered. Each queue's answer is
// complete up to the last job it examined, so the merge walks the jobs up
// to the earliest such key of the queues not read to their end, and stops
// at want matches or budget jobs examined, as the script does.
func (it *jobIter) readMerged(ctx context.Context, doing string, args []any, budget int) error {
	out, err := it.q.perQueueList(ctx, it.bases, args)
	if err != nil {
		return wrap(doing, err)
	}
	var cut *listCursor
	var all []match
	for _, o := range out {
		v, _ := o.([]any)
		c, err := parseChunk(doing, v)
		if err != nil {
			return err
		}
		if !c.ended && c.last != nil && (cut == nil || before(it.kind, *c.last, *cut)) {
			cut = c.last
		}
		all = append(all, c.rows...)
	}
	slices.SortStableFunc(all, func(a, b match) int {
		switch {
		case before(it.kind, a.key, b.key):
			return -1
		case before(it.kind, b.key, a.key):
			return 1
		}
		return 0
	})
	examined, found := 0, 0
	var last *listCursor
	stopped := false
	for _, m := range all {
		if cut != nil && before(it.kind, *cut, m.key) {
			break
		}
		if found == it.want || examined == budget {
			stopped = true
			break
		}
		examined++
		k := m.key
		last = &k
		if m.skip {
			continue
		}
		found++
		m.ordinal = examined
		it.buf = append(it.buf, m)
	}
	if last != nil {
		it.seek = last
	}
	it.chunk = examined
	// Ended: every queue read to its end and every job walked.
	it.ended = cut == nil && !stopped && examined == len(all)
	return nil
}

// perQueueList runs listScript with args once per base, in one pipeline,
// and returns each answer.
func (q *Queue) perQueueList(ctx context.Context, bases []string, args []any) ([]any, error) {
	out := make([]any, 0, len(bases))
	for try := 0; ; try++ {
		pipe := q.rdb.Pipeline()
		cmds := make([]*redis.Cmd, len(bases))
		for i, b := range bases {
			cmds[i] = listScript.EvalShaRO(ctx, pipe, []string{b}, args...)
		}
		_, err := pipe.Exec(ctx)
		if err == nil {
			for _, c := range cmds {
				out = append(out, c.Val())
			}
			return out, nil
		}
		if try > 0 || !redis.HasErrorPrefix(err, "NOSCRIPT") {
			return nil, err
		}
		if err := q.loadEverywhere(ctx, listScript); err != nil {
			return nil, err
		}
	}
}

// On a Cluster a periodic record ({prefix}:periodic:<name>, the prefix's
// slot) and the queue its job goes to are two slots, so ClaimTick is two
// steps, each one script of one slot and safe to run again:
//
//  1. the tick claimed in the record as on a standalone server (fence,
//     paused mark, last tick), with the job to push noted in the record
//     (fields pp, the job as JSON, and pg, its guard naming the record and
//     the tick);
//  2. the job pushed into its queue unless the guard is in the queue's
//     <base>:once (pushOnceScript), then the note cleared (and the
//     record's last job cleared when the push stored nothing: a held
//     unique key or active ID).
//
// ClaimTick runs both before it returns. A process killed between them
// leaves the note; the next ClaimTick of the same periodic job, by any
// process, pushes it first, once. Until then a reader sees the tick
// claimed (Periodics' LastTick and LastJob) and its job not yet in its
// queue.

// claimCluster claims a tick on a Cluster (step 1): KEYS = the record,
// the fence's lease (or the record again); ARGV = tick ms, next tick ms
// or "", schedule, the fence's epoch or "", the job's ID, the job as
// JSON, the guard. It returns claimScript's codes.
var claimCluster = redis.NewScript(prelude + `
local R, F = KEYS[1], KEYS[2]
if ARGV[4] ~= '' and tonumber(redis.call('HGET', F, 'e') or '0') ~= tonumber(ARGV[4]) then return -1 end
if redis.call('EXISTS', R) == 0 then return -2 end
local last = redis.call('HGET', R, 'l')
if last and last ~= '' and tonumber(last) >= tonumber(ARGV[1]) then return 0 end
if redis.call('HGET', R, 'p') == '1' then return 0 end
redis.call('HSET', R, 'l', ARGV[1], 'n', ARGV[2], 's', ARGV[3], 'j', ARGV[5], 'w', int(now_ms()), 'pp', ARGV[6], 'pg', ARGV[7])
return 1
`)

// tickPushed clears a record's noted push (step 2's end): KEYS = the
// record; ARGV = the guard, "1" when the push stored the job.
var tickPushed = redis.NewScript(`
if redis.call('HGET', KEYS[1], 'pg') ~= ARGV[1] then return 0 end
redis.call('HDEL', KEYS[1], 'pp', 'pg')
if ARGV[2] ~= '1' then redis.call('HSET', KEYS[1], 'j', '') end
return 1
`)

// claimTickCluster is ClaimTick on a Cluster: a push left noted by a
// process that stopped is pushed first, then steps 1 and 2.
func (q *Queue) claimTickCluster(ctx context.Context, doing string, p driver.PeriodicInfo, j queue.Job, rec, fenceKey, epoch string) (bool, error) {
	if err := q.pushNotedTick(ctx, rec); err != nil {
		return false, wrap(doing, err)
	}
	packed, err := json.Marshal(j)
	if err != nil {
		return false, wrap(doing, err)
	}
	tick := strconv.FormatInt(millis(p.LastTick), 10)
	guard := "tick:" + p.Name + ":" + tick
	code, err := claimCluster.Run(ctx, q.rdb, []string{rec, fenceKey},
		tick, msOrEmpty(p.NextTick), p.Schedule, epoch, j.ID, packed, guard).Int()
	if err != nil {
		return false, wrap(doing, err)
	}
	switch code {
	case 1:
		if err := q.batchSweep.step("tick-claimed"); err != nil {
			return true, nil // the next ClaimTick pushes it
		}
		return true, wrap(doing, q.pushNotedTick(ctx, rec))
	case 0:
		return false, nil
	case -1:
		return false, fmt.Errorf("redisqueue: %s: %w", doing, queue.ErrFenced)
	}
	return false, fmt.Errorf("redisqueue: %s: %w", doing, queue.ErrNotFound)
}

// pushNotedTick runs step 2 for the push noted in record rec, if any.
func (q *Queue) pushNotedTick(ctx context.Context, rec string) error {
	v, err := q.rdb.HMGet(ctx, rec, "pp", "pg").Result()
	if err != nil {
		return err
	}
	packed, _ := v[0].(string)
	guard, _ := v[1].(string)
	if packed == "" || guard == "" {
		return nil
	}
	var j queue.Job
	if err := json.Unmarshal([]byte(packed), &j); err != nil {
		return fmt.Errorf("decoding the job noted in %s: %w", rec, err)
	}
	b := q.base(j.QueueName())
	if err := q.register(ctx, j.QueueName()); err != nil {
		return err
	}
	ks := newKeyset(q.idsKey(b), q.qsetKey(b))
	args, err := q.pushArgs([]any{q.wake, guard}, ks, &j)
	if err != nil {
		return err
	}
	args = append(args, guardRetention.Milliseconds())
	out, err := pushOnceScript.Run(ctx, q.rdb, ks.keys, args...).Slice()
	if err != nil {
		return err
	}
	// {0}: the guard was there, an earlier run pushed it and the record's
	// last job stays; {1, status}: pushed now, status 1 when stored.
	stored := "1"
	if len(out) == 2 {
		if st, _ := out[1].(int64); st != 1 {
			stored = "0"
		}
	}
	return tickPushed.Run(ctx, q.rdb, []string{rec}, guard, stored).Err()
}

// reloadHook makes a Cluster client reload its map of slots as soon as a
// command fails for want of a node (a dial refused, a connection lost,
// CLUSTERDOWN): go-redis reloads it on a MOVED reply, which a dead master
// never sends, and otherwise only every ClusterStateReloadInterval (60 s
// by default), so without it a client would keep dialling a failed
// master that its replica replaced seconds before. The reload is
// go-redis' own (ReloadState: asynchronous, coalesced, 200 ms apart).
type reloadHook struct{ cc *redis.ClusterClient }

// hooked holds the Cluster clients given a reloadHook, so that a client
// shared by several Queues gets one.
var hooked sync.Map

// hookReload adds a reloadHook to cc, once.
func hookReload(cc *redis.ClusterClient) {
	if _, dup := hooked.LoadOrStore(cc, true); !dup {
		cc.AddHook(reloadHook{cc})
	}
}

// nodeFailed reports whether err says a node did not answer rather than
// what a node answered (other than CLUSTERDOWN).
func nodeFailed(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var re redis.Error
	if errors.As(err, &re) {
		return redis.HasErrorPrefix(err, "CLUSTERDOWN")
	}
	return true
}

func (h reloadHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h reloadHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if nodeFailed(err) {
			h.cc.ReloadState(ctx)
		}
		return err
	}
}

func (h reloadHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		if nodeFailed(err) {
			h.cc.ReloadState(ctx)
		}
		return err
	}
}
