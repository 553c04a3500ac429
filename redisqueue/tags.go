package redisqueue

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/meridianjobs/meridian/queue/driver"
)

// Monitored tags (driver.TagMonitor). The prefix's keys, in its slot:
//
//	{prefix}:tags                 set: the monitored tags
//	{prefix}:tag:<tag>:r, :f      sorted sets: the recent and failed lists, job IDs scored by
//	                              when the attempt ended (ms), so one time orders by ID
//	{prefix}:tag:<tag>:rj, :fj    hashes: job ID -> its record (JSON)
//
// The suffixes end in distinct letters, so no tag's keys meet another's.

// tagsKey is the set of monitored tags; tagKeys is the start of a tag's
// keys.
func (q *Queue) tagsKey() string           { return "{" + q.prefix + "}:tags" }
func (q *Queue) tagKeys(tag string) string { return "{" + q.prefix + "}:tag:" + tag }

// taggedRecord is a record as the hashes hold it.
type taggedRecord struct {
	Queue    string `json:"q"`
	Name     string `json:"n"`
	State    string `json:"s"`
	AtMs     int64  `json:"t"`
	Attempts int    `json:"a"`
	Error    string `json:"e,omitempty"`
}

// monitorTagScript adds a tag: KEYS = tags; ARGV = tag, the bound. It
// returns 1 when added or monitored already, 0 at the bound.
var monitorTagScript = redis.NewScript(`
if redis.call('SISMEMBER', KEYS[1], ARGV[1]) == 1 then return 1 end
if redis.call('SCARD', KEYS[1]) >= tonumber(ARGV[2]) then return 0 end
redis.call('SADD', KEYS[1], ARGV[1])
return 1
`)

// unmonitorTagScript drops a tag and its lists: KEYS = tags; ARGV = tag,
// the start of its keys.
var unmonitorTagScript = redis.NewScript(`
redis.call('SREM', KEYS[1], ARGV[1])
local k = ARGV[2]
redis.call('DEL', k..':r', k..':rj', k..':f', k..':fj')
return 1
`)

// recordTaggedScript adds records: KEYS = tags; ARGV = the bound, then
// per record its tag, the start of its tag's keys, job ID, score (ms),
// "1" for a dead letter, and the record (JSON). Records of a tag not
// monitored are dropped; each list it adds to is trimmed to the bound,
// its oldest (lowest score, then ID) dropped with their records.
var recordTaggedScript = redis.NewScript(`
local max = tonumber(ARGV[1])
local touched = {}
for i = 2, #ARGV, 6 do
  local tag, k, id, score, dead, rec = ARGV[i], ARGV[i+1], ARGV[i+2], ARGV[i+3], ARGV[i+4], ARGV[i+5]
  if redis.call('SISMEMBER', KEYS[1], tag) == 1 then
    redis.call('ZADD', k..':r', score, id)
    redis.call('HSET', k..':rj', id, rec)
    touched[k..':r'] = true
    if dead == '1' then
      redis.call('ZADD', k..':f', score, id)
      redis.call('HSET', k..':fj', id, rec)
      touched[k..':f'] = true
    end
  end
end
for z in pairs(touched) do
  local over = redis.call('ZCARD', z) - max
  if over > 0 then
    local old = redis.call('ZRANGE', z, 0, over - 1)
    redis.call('ZREMRANGEBYRANK', z, 0, over - 1)
    redis.call('HDEL', z..'j', unpack(old))
  end
end
return 1
`)

// taggedJobsScript reads a list, newest first: KEYS = the list's sorted
// set, its hash; ARGV = the bound. It returns IDs and records in turn.
var taggedJobsScript = redis.NewScript(`
local ids = redis.call('ZREVRANGE', KEYS[1], 0, tonumber(ARGV[1]) - 1)
if #ids == 0 then return {} end
local recs = redis.call('HMGET', KEYS[2], unpack(ids))
local out = {}
for i, id in ipairs(ids) do
  out[#out+1] = id
  out[#out+1] = recs[i] or ''
end
return out
`)

// MonitorTag starts monitoring tag (see driver.TagMonitor).
func (q *Queue) MonitorTag(ctx context.Context, tag string) error {
	doing := fmt.Sprintf("monitoring tag %q", tag)
	if err := driver.CheckTag(tag); err != nil {
		return fmt.Errorf("redisqueue: %s: %w", doing, err)
	}
	if err := ctxErr(ctx, doing); err != nil {
		return err
	}
	ok, err := monitorTagScript.Run(ctx, q.rdb, []string{q.tagsKey()}, tag, driver.MaxMonitoredTags).Int()
	if err == nil && ok == 0 {
		return fmt.Errorf("redisqueue: %s: %w", doing, driver.ErrTooManyTags)
	}
	return wrap(doing, err)
}

// UnmonitorTag stops monitoring tag and deletes its records.
func (q *Queue) UnmonitorTag(ctx context.Context, tag string) error {
	doing := fmt.Sprintf("unmonitoring tag %q", tag)
	if err := ctxErr(ctx, doing); err != nil {
		return err
	}
	return wrap(doing, unmonitorTagScript.Run(ctx, q.rdb, []string{q.tagsKey()}, tag, q.tagKeys(tag)).Err())
}

// MonitoredTags lists the monitored tags, sorted.
func (q *Queue) MonitoredTags(ctx context.Context) ([]string, error) {
	const doing = "listing the monitored tags"
	if err := ctxErr(ctx, doing); err != nil {
		return nil, err
	}
	tags, err := q.rdb.SMembers(ctx, q.tagsKey()).Result()
	if err != nil {
		return nil, wrap(doing, err)
	}
	slices.Sort(tags)
	return tags, nil
}

// recordChunk bounds the records of one script call.
const recordChunk = 500

// RecordTagged records jobs under their tags, when monitored, a script
// per recordChunk records, and trims the lists it added to.
func (q *Queue) RecordTagged(ctx context.Context, jobs []driver.TaggedJob) error {
	doing := fmt.Sprintf("recording %d jobs of monitored tags", len(jobs))
	if err := ctxErr(ctx, doing); err != nil {
		return err
	}
	for part := range slices.Chunk(jobs, recordChunk) {
		args := make([]any, 0, 1+6*len(part))
		args = append(args, driver.MaxTaggedJobs)
		for _, j := range part {
			rec, err := json.Marshal(taggedRecord{Queue: j.Queue, Name: j.Name, State: string(j.State),
				AtMs: j.At.UnixMilli(), Attempts: j.Attempts, Error: j.Error})
			if err != nil {
				return fmt.Errorf("redisqueue: %s: %w", doing, err)
			}
			dead := "0"
			if j.State == driver.StateDead {
				dead = "1"
			}
			args = append(args, j.Tag, q.tagKeys(j.Tag), j.ID, j.At.UnixMilli(), dead, rec)
		}
		if err := recordTaggedScript.Run(ctx, q.rdb, []string{q.tagsKey()}, args...).Err(); err != nil {
			return wrap(doing, err)
		}
	}
	return nil
}

// TaggedJobs returns tag's records, newest first.
func (q *Queue) TaggedJobs(ctx context.Context, tag string, failed bool) ([]driver.TaggedJob, error) {
	doing := fmt.Sprintf("reading the jobs of tag %q", tag)
	if err := ctxErr(ctx, doing); err != nil {
		return nil, err
	}
	k := q.tagKeys(tag) + ":r"
	if failed {
		k = q.tagKeys(tag) + ":f"
	}
	vals, err := taggedJobsScript.Run(ctx, q.rdb, []string{k, k + "j"}, driver.MaxTaggedJobs).StringSlice()
	if err != nil {
		return nil, wrap(doing, err)
	}
	out := make([]driver.TaggedJob, 0, len(vals)/2)
	for i := 0; i+1 < len(vals); i += 2 {
		var r taggedRecord
		if err := json.Unmarshal([]byte(vals[i+1]), &r); err != nil {
			return nil, fmt.Errorf("redisqueue: %s: record of job %s: %w", doing, strconv.Quote(vals[i]), err)
		}
		out = append(out, driver.TaggedJob{Tag: tag, ID: vals[i], Queue: r.Queue, Name: r.Name,
			State: driver.JobState(r.State), At: time.UnixMilli(r.AtMs), Attempts: r.Attempts, Error: r.Error})
	}
	return out, nil
}
