package redisqueue

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// actionEntry is one operator action as a job's hash keeps it, in the
// JSON array of its field ac: when (ms), by whom, what changed.
type actionEntry struct {
	At   int64  `json:"t"`
	By   string `json:"by"`
	What string `json:"do"`
}

// decodeActions reads the field ac of a job's hash; a value that is not
// a JSON array of actionEntry reads as none: the job itself still shows.
func decodeActions(v any) []driver.Action {
	s, _ := v.(string)
	if s == "" {
		return nil
	}
	var es []actionEntry
	if json.Unmarshal([]byte(s), &es) != nil {
		return nil
	}
	out := make([]driver.Action, len(es))
	for i, e := range es {
		out[i] = driver.Action{At: time.UnixMilli(e.At), By: e.By, What: e.What}
	}
	return out
}

// Amend changes the job id as a says (see driver.Controller) in one
// script that checks its state, changes it and appends the action to its
// hash's field ac (the last driver.MaxHistory). This store keeps no
// finished jobs: AmendRetry applies to dead letters only, and a done or
// cancelled job's ID is not found.
func (q *Queue) Amend(ctx context.Context, id string, a driver.Amendment) (driver.JobState, error) {
	doing := fmt.Sprintf("amending job %s (%s)", id, a.Op)
	if err := ctxErr(ctx, doing); err != nil {
		return "", err
	}
	if a.Op != driver.AmendRetry && a.Op != driver.AmendRunNow && a.Op != driver.AmendNote {
		return "", fmt.Errorf("redisqueue: %s: unknown change: %w", doing, driver.ErrJobState)
	}
	if a.Payload != nil {
		// The payload limit of Validate, checked on the job as it would be.
		if err := driver.Validate(driver.Job{ID: id, Payload: a.Payload}); err != nil {
			return "", err
		}
	}
	rec := a.Action.Dated(time.Now())
	entry, _ := json.Marshal(actionEntry{At: rec.At.UnixMilli(), By: rec.By, What: rec.What})
	hasPayload := "0"
	if a.Payload != nil {
		hasPayload = "1"
	}
	bases, err := q.idBases(ctx, id)
	if err != nil {
		return "", wrap(doing, err)
	}
	for _, b := range bases {
		out, err := amendScript.Run(ctx, q.rdb, []string{q.idsKey(b)},
			id, string(a.Op), hasPayload, a.Payload, entry, q.wake, driver.MaxHistory, string(a.From)).Slice()
		if err != nil {
			return "", wrap(doing, err)
		}
		v, _ := out[1].(string)
		switch code, _ := out[0].(int64); code {
		case 1:
			return driver.JobState(v), nil
		case 2:
			return "", fmt.Errorf("redisqueue: %s: %w", doing, &driver.DuplicateError{ExistingID: v})
		case 3:
			return "", fmt.Errorf("redisqueue: %s: the job is %s: %w", doing, v, driver.ErrJobState)
		}
	}
	return "", fmt.Errorf("redisqueue: %s: %w", doing, queue.ErrNotFound)
}

// amendScript makes one change of Amend: KEYS = ids; ARGV = id, "retry",
// "run_now" or "note", "1" when a payload follows, the payload, the action
// entry (JSON), channel, how many actions to keep, the only state the
// change applies to ("" for any). It returns {1, the
// state the job was in}, {0, ""} when no job has that ID, {2, holder}
// when a retry's unique key is held by another active job, {3, state}
// when the job's state refuses the change.
var amendScript = redis.NewScript(prelude + batchPrelude + controlLua + `
local ids, id = KEYS[1], ARGV[1]
local now = now_ms()
local B = redis.call('HGET', ids, id)
if not B then return {0, ''} end
local jk = B..':j:'..id
local was = state_of(jk, now)
if not was then return {0, ''} end
if ARGV[8] ~= '' and was ~= ARGV[8] then return {3, was} end
if ARGV[2] == 'note' then
elseif ARGV[2] == 'retry' and was == 'dead' then
  local code, v = retry_dead(ids, id, now)
  if code == 2 then return {2, v} end
  if ARGV[3] == '1' then redis.call('HSET', jk, 'p', ARGV[4]) end
  redis.call('PUBLISH', ARGV[6], v)
elseif ARGV[2] == 'run_now' and was == 'scheduled' then
  unsched(B, id, jk)
  redis.call('HSET', jk, 'av', int(now))
  enqueue(B, id, jk, now, now)
  redis.call('PUBLISH', ARGV[6], redis.call('HGET', jk, 'q'))
else
  return {3, was}
end
local acts = {}
local old = redis.call('HGET', jk, 'ac')
if old then
  local good, v = pcall(cjson.decode, old)
  if good and type(v) == 'table' then acts = v end
end
acts[#acts+1] = cjson.decode(ARGV[5])
local keep = tonumber(ARGV[7])
while #acts > keep do table.remove(acts, 1) end
redis.call('HSET', jk, 'ac', cjson.encode(acts))
return {1, was}
`)
