package redisqueue

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// Named leases and periodic records live under the prefix's own tag:
//
//	{prefix}:lease:<name>     hash: h holder, x expiry (ms), e epoch
//	{prefix}:periodic:<name>  hash: s schedule, l last tick, n next tick (ms), j last job ID,
//	                          p paused ("1"), w seen (ms), t the job template
//	{prefix}:periodics        set: the names of the periodic records
//
// A released or expired lease keeps its hash, so that its epoch keeps
// growing.

// leaseScript takes, renews or releases a named lease: KEYS = the lease;
// ARGV = holder, ttl ms, "acquire" or "release". It returns {held (0 or
// 1), epoch}.
var leaseScript = redis.NewScript(prelude + `
local K = KEYS[1]
local now = now_ms()
local v = redis.call('HMGET', K, 'h', 'x', 'e')
local h, x, e = v[1] or '', tonumber(v[2] or '0'), tonumber(v[3] or '0')
if ARGV[3] == 'release' then
  if h ~= '' and h == ARGV[1] then redis.call('HSET', K, 'h', '', 'x', 0) end
  return {0, 0}
end
local live = h ~= '' and x > now
if live and h ~= ARGV[1] then return {0, 0} end
if not live then e = e + 1 end
redis.call('HSET', K, 'h', ARGV[1], 'x', int(now + tonumber(ARGV[2])), 'e', int(e))
return {1, e}
`)

// registerScript creates or refreshes a periodic record: KEYS = the
// record, the set of names; ARGV = name, schedule, last tick ms or "",
// next tick ms or "", the job template. It keeps a record's last tick and
// paused mark, and returns the last tick.
var registerScript = redis.NewScript(prelude + `
local R = KEYS[1]
if redis.call('EXISTS', R) == 0 then
  redis.call('HSET', R, 'l', ARGV[3], 'j', '')
  redis.call('SADD', KEYS[2], ARGV[1])
end
redis.call('HSET', R, 's', ARGV[2], 'n', ARGV[4], 't', ARGV[5], 'w', int(now_ms()))
return redis.call('HGET', R, 'l')
`)

// pausePeriodicScript sets or clears a periodic record's paused mark:
// KEYS = the record; ARGV = "1" or "". It returns 0 when the record does
// not exist.
var pausePeriodicScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], 'p', ARGV[1])
return 1
`)

// claimScript claims a tick and pushes its job, both or neither: KEYS =
// ids, queues, the record, the fence's lease (or the record again), then
// the job's base; ARGV = channel, 1, the job's pushFields, then the tick
// ms, the next tick ms or "", the schedule, the fence's epoch or "". It
// returns 1 when claimed, 0 when the tick was claimed before, -1 when
// fenced, -2 when the record does not exist.
var claimScript = redis.NewScript(prelude + `
local ids, qset, R, F = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local a = 3 + ` + itoa(pushFields) + `
if ARGV[a+3] ~= '' and tonumber(redis.call('HGET', F, 'e') or '0') ~= tonumber(ARGV[a+3]) then return -1 end
if redis.call('EXISTS', R) == 0 then return -2 end
local last = redis.call('HGET', R, 'l')
if last and last ~= '' and tonumber(last) >= tonumber(ARGV[a]) then return 0 end
if redis.call('HGET', R, 'p') == '1' then return 0 end
local now = now_ms()
local st, _, ready = push_one(ids, qset, now, 3)
local job = ''
if st == 1 then job = ARGV[3] end
redis.call('HSET', R, 'l', ARGV[a], 'n', ARGV[a+1], 's', ARGV[a+2], 'j', job, 'w', int(now))
local woke = {}
if ready then woke[ARGV[4]] = true end
publish(ARGV[1], woke)
return 1
`)

func (q *Queue) leaseKey(name string) string    { return "{" + q.prefix + "}:lease:" + name }
func (q *Queue) periodicKey(name string) string { return "{" + q.prefix + "}:periodic:" + name }
func (q *Queue) periodicsKey() string           { return "{" + q.prefix + "}:periodics" }

// AcquireLease takes the named lease for holder until now plus ttl by the
// Redis server's clock, or renews it (see driver.Scheduler).
func (q *Queue) AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (bool, error) {
	_, held, err := q.AcquireLeaseEpoch(ctx, name, holder, ttl)
	return held, err
}

// AcquireLeaseEpoch is AcquireLease that also returns the lease's epoch
// (see driver.Scheduler).
func (q *Queue) AcquireLeaseEpoch(ctx context.Context, name, holder string, ttl time.Duration) (int64, bool, error) {
	doing := "acquiring lease " + name
	if err := ctxErr(ctx, doing); err != nil {
		return 0, false, err
	}
	if holder == "" {
		return 0, false, fmt.Errorf("redisqueue: %s: an empty holder", doing)
	}
	out, err := leaseScript.Run(ctx, q.rdb, []string{q.leaseKey(name)}, holder, ttl.Milliseconds(), "acquire").Int64Slice()
	if err != nil {
		return 0, false, wrap(doing, err)
	}
	if out[0] != 1 {
		return 0, false, nil
	}
	return out[1], true, nil
}

// ReleaseLease gives up the named lease if holder holds it (see
// driver.Scheduler).
func (q *Queue) ReleaseLease(ctx context.Context, name, holder string) error {
	doing := "releasing lease " + name
	if err := ctxErr(ctx, doing); err != nil {
		return err
	}
	return wrap(doing, leaseScript.Run(ctx, q.rdb, []string{q.leaseKey(name)}, holder, 0, "release").Err())
}

// msOrEmpty returns t in ms, or "" for the zero time.
func msOrEmpty(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return strconv.FormatInt(millis(t), 10)
}

func timeOrZero(s string) time.Time {
	if s == "" {
		return time.Time{}
	}
	ms, _ := strconv.ParseInt(s, 10, 64)
	return time.UnixMilli(ms)
}

// RegisterPeriodic creates the record p.Name or refreshes its schedule and
// next tick, and returns its last tick (see driver.Scheduler).
func (q *Queue) RegisterPeriodic(ctx context.Context, p driver.PeriodicInfo) (time.Time, error) {
	doing := "registering periodic job " + p.Name
	if err := ctxErr(ctx, doing); err != nil {
		return time.Time{}, err
	}
	last, err := registerScript.Run(ctx, q.rdb, []string{q.periodicKey(p.Name), q.periodicsKey()},
		p.Name, p.Schedule, msOrEmpty(p.LastTick), msOrEmpty(p.NextTick), p.Template).Text()
	if err != nil && err != redis.Nil {
		return time.Time{}, wrap(doing, err)
	}
	return timeOrZero(last), nil
}

// ClaimTick records the tick p.LastTick and pushes j in one script, both
// or neither (see driver.Scheduler). A Fence in ctx (driver.WithFence) is
// checked in the same script: a stale epoch claims nothing and returns
// an error matching queue.ErrFenced.
func (q *Queue) ClaimTick(ctx context.Context, p driver.PeriodicInfo, j queue.Job) (bool, error) {
	doing := "claiming a tick of periodic job " + p.Name
	if err := ctxErr(ctx, doing); err != nil {
		return false, err
	}
	if j.ID == "" {
		j.ID = driver.NewID()
	}
	if err := driver.Validate(j); err != nil {
		return false, err
	}
	rec := q.periodicKey(p.Name)
	fenceKey, epoch := rec, ""
	if f, ok := driver.FenceFrom(ctx); ok {
		fenceKey, epoch = q.leaseKey(f.Lease), strconv.FormatInt(f.Epoch, 10)
	}
	if q.cluster {
		return q.claimTickCluster(ctx, doing, p, j, rec, fenceKey, epoch)
	}
	ks := newKeyset(q.ids, q.queues, rec, fenceKey)
	args, err := q.pushArgs([]any{q.wake, 1}, ks, &j)
	if err != nil {
		return false, wrap(doing, err)
	}
	args = append(args, strconv.FormatInt(millis(p.LastTick), 10), msOrEmpty(p.NextTick), p.Schedule, epoch)
	code, err := claimScript.Run(ctx, q.rdb, ks.keys, args...).Int()
	if err != nil {
		return false, wrap(doing, err)
	}
	switch code {
	case 1:
		return true, nil
	case 0:
		return false, nil
	case -1:
		return false, fmt.Errorf("redisqueue: %s: %w", doing, queue.ErrFenced)
	}
	return false, fmt.Errorf("redisqueue: %s: %w", doing, queue.ErrNotFound)
}

// PausePeriodic sets whether the periodic job name's ticks are claimed
// (see driver.Scheduler).
func (q *Queue) PausePeriodic(ctx context.Context, name string, paused bool) error {
	doing := "pausing periodic job " + name
	if err := ctxErr(ctx, doing); err != nil {
		return err
	}
	mark := ""
	if paused {
		mark = "1"
	}
	found, err := pausePeriodicScript.Run(ctx, q.rdb, []string{q.periodicKey(name)}, mark).Int()
	if err != nil {
		return wrap(doing, err)
	}
	if found == 0 {
		return fmt.Errorf("redisqueue: %s: %w", doing, queue.ErrNotFound)
	}
	return nil
}

// Periodics lists the periodic records, sorted by name.
func (q *Queue) Periodics(ctx context.Context) ([]driver.PeriodicInfo, error) {
	const doing = "listing periodic jobs"
	if err := ctxErr(ctx, doing); err != nil {
		return nil, err
	}
	names, err := q.rdb.SMembers(ctx, q.periodicsKey()).Result()
	if err != nil {
		return nil, wrap(doing, err)
	}
	slices.Sort(names)
	pipe := q.rdb.Pipeline()
	cmds := make([]*redis.SliceCmd, len(names))
	for i, n := range names {
		cmds[i] = pipe.HMGet(ctx, q.periodicKey(n), "s", "l", "n", "j", "p", "w", "t")
	}
	if len(names) > 0 {
		if _, err := pipe.Exec(ctx); err != nil {
			return nil, wrap(doing, err)
		}
	}
	out := make([]driver.PeriodicInfo, 0, len(names))
	for i, c := range cmds {
		v := c.Val()
		s := func(k int) string { x, _ := v[k].(string); return x }
		p := driver.PeriodicInfo{Name: names[i], Schedule: s(0), LastTick: timeOrZero(s(1)), NextTick: timeOrZero(s(2)), LastJobID: s(3),
			Paused: s(4) == "1", Seen: timeOrZero(s(5))}
		if t := s(6); t != "" {
			p.Template = []byte(t)
		}
		out = append(out, p)
	}
	return out, nil
}
