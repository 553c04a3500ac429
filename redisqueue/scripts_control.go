package redisqueue

import "github.com/redis/go-redis/v9"

// The scripts of the Controller ability (control.go): pause and resume,
// cancel, and the bulk actions. They follow scripts.go's rules: one
// script per state change, arguments checked on the Go side first, the
// queue's totals in <base>:stats counted in the same script, times in
// milliseconds.

// controlLua is the helpers of the control scripts, after prelude and
// batchPrelude.
const controlLua = `
-- state_of names the state of the job whose hash is jk as inspection
-- does, deriving it from time as the SQL drivers do: a scheduled job
-- whose time came, or a leased one whose lease expired, is ready (the
-- next reservation moves it). It returns nil when there is no such job.
local function state_of(jk, now)
  local v = redis.call('HMGET', jk, 'st', 'av', 'ex')
  local st = v[1]
  if st == 'r' then return 'ready' end
  if st == 's' then
    if (tonumber(v[2]) or 0) <= now then return 'ready' end
    return 'scheduled'
  end
  if st == 'x' then
    if (tonumber(v[3]) or 0) <= now then return 'ready' end
    return 'running'
  end
  if st == 'd' then return 'dead' end
  if st == 'g' then return 'grouped' end
  if st == 'w' then return 'sequenced' end
  return nil
end
-- log_cancel writes the lease tk of job id, cancelled while leased, to
-- the cancel log, scored by stamp (the cancelling process's clock):
-- CancelledSince reads it.
local function log_cancel(clog, id, tk, stamp)
  if tk then redis.call('ZADD', clog, stamp, id .. '\0' .. tk) end
end
-- cancel_one cancels the active job id: off its set, its unique key
-- freed, deleted (this store keeps no finished jobs), counted in
-- <base>:stats; a leased job's lease goes to the cancel log, and a batch
-- member or graph node is noted cancelled in its queue's outbox (step 1
-- of scripts_batch.go, scripts_graph.go). It returns 1, the state the job
-- was in and, for a batch member or graph node, its queue's name (whose outbox the caller settles); 0
-- when there is no such job; 2 when it has finished (a dead letter).
local function cancel_one(ids, clog, id, now, stamp)
  local B = redis.call('HGET', ids, id)
  if not B then return 0, '', '' end
  local jk = B..':j:'..id
  local was = state_of(jk, now)
  if not was then return 0, '', '' end
  if was == 'dead' then return 2, '', '' end
  local v = redis.call('HMGET', jk, 'st', 'tk', 'q')
  if v[1] == 'x' then
    redis.call('ZREM', B..':run', id)
    log_cancel(clog, id, v[2], stamp)
  else
    unready(B, id, jk, v[1])
  end
  unseat(B, id, jk, now)
  local settle = ''
  local bid = batch_of(jk)
  if bid then
    note_member(B, bid, id, 3, '')
    settle = v[3]
  end
  local gid = graph_of(jk)
  if gid then
    note_node(B, gid, id, 3, '')
    settle = v[3]
  end
  free_key(B, jk, id)
  drop(ids, B, jk, id)
  redis.call('HINCRBY', B..':stats', 'cancelled', 1)
  return 1, was, settle
end
-- trim_log bounds the cancel log: entries older than keep ms before
-- stamp go, and past cap entries the oldest.
local function trim_log(clog, stamp, keep, cap)
  redis.call('ZREMRANGEBYSCORE', clog, '-inf', '(' .. int(stamp - keep))
  redis.call('ZREMRANGEBYRANK', clog, 0, -(cap + 1))
end
-- retry_dead moves the dead letter id back to ready, available now,
-- attempts reset. It returns 1 when moved (and the queue's name), 0 when
-- id is not a dead letter, 2 and the holder when another job (active, or
-- a dead letter that holds it) holds its unique key.
local function retry_dead(ids, id, now)
  local B = redis.call('HGET', ids, id)
  if not B then return 0, '' end
  local jk = B..':j:'..id
  local v = redis.call('HMGET', jk, 'st', 'uk', 'q')
  if v[1] ~= 'd' then return 0, '' end
  if v[2] then
    local holder = redis.call('HGET', B..':uniq', v[2])
    if holder and holder ~= id and redis.call('EXISTS', B..':j:'..holder) == 1 then return 2, holder end
    redis.call('HSET', B..':uniq', v[2], id)
  end
  redis.call('ZREM', B..':dead', id)
  redis.call('HDEL', jk, 'dd')
  redis.call('HSET', jk, 'a', 0, 'av', int(now))
  enqueue(B, id, jk, now, now)
  return 1, v[3]
end
-- forget_dead deletes the dead letter id, freeing the unique key it
-- holds: 1 when deleted, 0 when id is not a dead letter.
local function forget_dead(ids, id)
  local B = redis.call('HGET', ids, id)
  if not B then return 0 end
  local jk = B..':j:'..id
  if redis.call('HGET', jk, 'st') ~= 'd' then return 0 end
  redis.call('ZREM', B..':dead', id)
  unseat(B, id, jk, now_ms())
  free_key(B, jk, id)
  drop(ids, B, jk, id)
  return 1
end
`

// pauseScript pauses or resumes a queue: KEYS = queues, paused, base;
// ARGV = name, "1" to pause or "0" to resume, channel. A pause is the key
// <base>:paused, which reserveScript checks in the same script that
// leases, and the name in the prefix's set of paused queues, which
// Paused lists. A resume that ends a pause publishes the queue's name, so
// Waits on it look again at once.
var pauseScript = redis.NewScript(`
local qset, pset, B, name = KEYS[1], KEYS[2], KEYS[3], ARGV[1]
if ARGV[2] == '1' then
  redis.call('SET', B..':paused', '1')
  redis.call('SADD', pset, name)
  redis.call('SADD', qset, name)
  return 1
end
local was = redis.call('DEL', B..':paused')
redis.call('SREM', pset, name)
if was == 1 then redis.call('PUBLISH', ARGV[3], name) end
return was
`)

// cancelScript cancels one job: KEYS = ids, the cancel log; ARGV = id,
// stamp (ms), keep (ms), cap, channel. It returns cancel_one's code,
// state and queue to settle, and publishes the queue when the next member
// of the job's sequence became ready.
var cancelScript = redis.NewScript(prelude + batchPrelude + controlLua + `
local ids, clog = KEYS[1], KEYS[2]
local stamp = tonumber(ARGV[2])
local code, was, settle = cancel_one(ids, clog, ARGV[1], now_ms(), stamp)
if code == 1 then trim_log(clog, stamp, tonumber(ARGV[3]), tonumber(ARGV[4])) end
publish(ARGV[5], {})
return {code, was, settle}
`)

// bulkScript applies one bulk action to a chunk of jobs: KEYS = ids, the
// cancel log; ARGV = action ("retry", "forget" or "cancel"), stamp (ms),
// keep (ms), cap, channel, the action entry a retry appends to each job's
// field ac ("" for none), how many actions to keep, then the jobs' IDs. Jobs no longer in a state
// the action acts on, and dead letters whose unique key another job
// holds, are skipped. It returns how many it changed, then the queues
// whose outbox got a cancelled batch member (to settle), and publishes
// each queue that got a ready job (a retried dead letter, or the next
// member of a sequence whose head it cancelled or forgot).
var bulkScript = redis.NewScript(prelude + batchPrelude + controlLua + `
local ids, clog, action = KEYS[1], KEYS[2], ARGV[1]
local stamp = tonumber(ARGV[2])
local now = now_ms()
local n, woke, settle = 0, {}, {}
local entry, keep = ARGV[6], tonumber(ARGV[7])
for i = 8, #ARGV do
  local id = ARGV[i]
  if action == 'retry' then
    local code, qn = retry_dead(ids, id, now)
    if code == 1 then
      n = n + 1
      woke[qn] = true
      if entry ~= '' then
        local jk = redis.call('HGET', ids, id)..':j:'..id
        local acts = {}
        local good, v = pcall(cjson.decode, redis.call('HGET', jk, 'ac') or '')
        if good and type(v) == 'table' then acts = v end
        acts[#acts+1] = cjson.decode(entry)
        while #acts > keep do table.remove(acts, 1) end
        redis.call('HSET', jk, 'ac', cjson.encode(acts))
      end
    end
  elseif action == 'forget' then
    n = n + forget_dead(ids, id)
  elseif action == 'cancel' then
    local code, _, qn = cancel_one(ids, clog, id, now, stamp)
    if code == 1 then
      n = n + 1
      if qn ~= '' then settle[qn] = true end
    end
  end
end
if action == 'cancel' and n > 0 then trim_log(clog, stamp, tonumber(ARGV[3]), tonumber(ARGV[4])) end
publish(ARGV[5], woke)
local out = {n}
for qn in pairs(settle) do out[#out+1] = qn end
return out
`)
