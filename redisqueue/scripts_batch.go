package redisqueue

import "github.com/redis/go-redis/v9"

// The scripts of batches. A batch's keys share the hash tag
// {prefix:%B:<id>} (its batch base; "%B" never appears in a queue's
// escaped name, so no queue's base meets it), and a batch's members sit in
// their queues' slots: a member's outcome crosses slots. It does so in
// steps, each one script within one slot and each safe to run again
// (docs/drivers.md, "Batches across slots"):
//
//  1. the member's outcome (Complete, Purge, a batch's cancel) and an
//     event naming it, in the member queue's outbox <base>:bout, in one
//     script of the queue's slot; a done member's pushes (its chain's
//     next step) ride in the event, not pushed;
//  2. the event applied to the batch by driver.MemberTransition's rule,
//     the counters with it, and each callback it makes due marked as due
//     (pt, pk, pf) once, in one script of the batch's slot; an event
//     applied twice moves nothing the second time; a pending member done
//     while the batch runs first adds its chain's next step as a pending
//     member, its push kept on the batch's :nx;
//  3. each step on :nx pushed into its queue under a guard naming the
//     batch and the step, <batch>"\0step\0"<step ID>, in <base>:once,
//     then taken off :nx, and dropped from the members if the push stored
//     nothing (an active job held its ID: the guard notes that too); each due
//     callback pushed into its queue under a guard, <base>:once, that a
//     second push of the same callback finds, then its mark cleared in
//     the batch; a failure that cancels the batch has its pending members
//     cancelled through step 1 of their queues;
//  4. the event deleted from the outbox, once the batch has nothing left
//     to do for it.
//
// The process that records an outcome runs every step before Complete
// returns; one killed between two steps leaves the event in the outbox,
// and any process that reserves from the queue later runs the steps again
// (Queue.sweep).
//
// Any other script that ends a job (a cancel, a bulk action) counts a
// member in its batch the same way: note_member(B, batch_of(jk), id, 3,
// '') beside the job's change, then Queue.settle on the job's queue.

// batchPrelude is the helpers of the queue-side scripts that note a batch
// member's outcome.
var batchPrelude = `
-- pack joins strings as <length>:<bytes> each, so that any bytes survive.
local function pack(...)
  local t = {}
  for _, v in ipairs({...}) do t[#t+1] = string.format('%d:', #v) .. v end
  return table.concat(t)
end
local function unpack_ev(s)
  local out, p = {}, 1
  while p <= #s do
    local c = string.find(s, ':', p, true)
    local n = tonumber(string.sub(s, p, c - 1))
    out[#out+1] = string.sub(s, c + 1, c + n)
    p = c + n + 1
  end
  return out
end
-- note_member records, in queue B's outbox, that member id of batch bid
-- ended with outcome oc (0 done, 2 failed, 3 cancelled); keep, when
-- given, is how long (ms) its result, kept without expiry, is kept once
-- the batch has finished. steps, when given, is the done member's
-- pushes (its chain's next step), each its pushFields with the base
-- index left out: the batch makes them members and pushes them
-- (applyBatchScript).
local function note_member(B, bid, id, oc, reason, keep, steps)
  local n = redis.call('INCR', B..':seq')
  redis.call('HSET', B..':bout', int(n), pack(bid, id, tostring(oc), reason, keep or '', unpack(steps or {})))
end
-- note_push records, in queue B's outbox, the push whose pushFields start
-- at ARGV[i] (its base index left out: the queue's name finds it), under
-- guard, the completed job's ID, lease token and the push's place. A job
-- whose ID an active job holds now is skipped here, as push_one would
-- skip it, so that the decision is the completing script's.
local function note_push(ids, B, guard, i)
  local old = redis.call('HGET', ids, ARGV[i])
  if old then
    local ost = redis.call('HGET', old..':j:'..ARGV[i], 'st')
    if ost and ost ~= 'd' then return end
  end
  local f = {guard, '\0push'}
  for k = 0, ` + itoa(pushFields) + ` - 1 do f[#f+1] = ARGV[i+k] end
  f[5] = ''
  local n = redis.call('INCR', B..':seq')
  redis.call('HSET', B..':bout', int(n), pack(unpack(f)))
end
-- noted reports whether queue B's outbox holds an event of job id.
local function noted(B, id)
  local evs = redis.call('HVALS', B..':bout')
  for _, v in ipairs(evs) do
    if unpack_ev(v)[2] == id then return true end
  end
  return false
end
-- batch_of returns the batch a job's meta names, or nil.
local function batch_of(jk)
  local md = redis.call('HGET', jk, 'md')
  if md and string.find(md, '"meridian.batch"', 1, true) then
    local ok, m = pcall(cjson.decode, md)
    if ok and type(m) == 'table' and type(m['meridian.batch']) == 'string' then return m['meridian.batch'] end
  end
  return nil
end
` + graphPrelude

// batchSide is the helpers of the scripts on a batch's slot. The record,
// KEYS[1], is a hash: id, nm (name), af (allow failures), cb (callbacks),
// cr, ca, ta, ka, fa (created, cancelled, then, catch, finished at, ms),
// tot, don, fai, can (members, and those done, failed, cancelled), kf and
// kr (the first failed member and its reason), and pt, pk, pf (then,
// catch, finally due and not yet known pushed). <batch base>:st is a hash
// member ID -> state (p, d, f or c) followed by the member's queue;
// <batch base>:p, :d, :f and :c are sorted sets of the member IDs in each
// state (score 0, ordered by ID). <batch base>:rk is a hash member ID ->
// the ms its result is kept after the batch finishes, and :rl the
// results to release ("<keep>:<member ID>"), filled when it finishes.
// <batch base>:nx is the batch's step pushes: a hash member ID -> the
// push of a chain's next step added as a member and not yet known
// pushed (its pushFields, base index left out, packed), and the
// record's nx counts them.
const batchSide = `
local RF = {'id','nm','af','cr','ca','ta','ka','fa','tot','don','fai','can','pt','pk','pf','kf','kr','cb','nx'}
local CNT = {d = 'don', f = 'fai', c = 'can'}
local function record(BB) return redis.call('HMGET', BB, unpack(RF)) end
-- due marks the callbacks the counters make due (driver.BatchDue), each
-- once, and starts the retention of a batch that finished.
local function due(BB, now, keep)
  local v = redis.call('HMGET', BB, 'tot', 'don', 'fai', 'can', 'ta', 'ka', 'fa')
  local tot, don, fai, can = tonumber(v[1]) or 0, tonumber(v[2]) or 0, tonumber(v[3]) or 0, tonumber(v[4]) or 0
  if fai > 0 and not v[6] then redis.call('HSET', BB, 'ka', int(now), 'pk', 1) end
  if tot > 0 and don == tot and not v[5] then redis.call('HSET', BB, 'ta', int(now), 'pt', 1) end
  if tot > 0 and don + fai + can == tot and not v[7] then
    redis.call('HSET', BB, 'fa', int(now), 'pf', 1)
    local rk = redis.call('HGETALL', BB..':rk')
    for k = 1, #rk, 2 do redis.call('RPUSH', BB..':rl', rk[k+1] .. ':' .. rk[k]) end
    for _, k in ipairs({BB, BB..':st', BB..':p', BB..':d', BB..':f', BB..':c', BB..':rk', BB..':rl', BB..':nx'}) do
      redis.call('PEXPIRE', k, keep)
    end
  end
end
-- move sets member id from state 'from' (with its queue) to 'to'.
local function move(BB, id, from, to, qn)
  redis.call('HSET', BB..':st', id, to .. qn)
  redis.call('ZREM', BB..':'..from, id)
  redis.call('ZADD', BB..':'..to, 0, id)
  if CNT[from] then redis.call('HINCRBY', BB, CNT[from], -1) end
  if CNT[to] then redis.call('HINCRBY', BB, CNT[to], 1) end
end
-- add_step adds the chain step id of queue qn as a pending member, its
-- push (entry) on the step pushes, unless id is a member already.
local function add_step(BB, id, qn, entry)
  if redis.call('HSETNX', BB..':st', id, 'p' .. qn) == 0 then return end
  redis.call('ZADD', BB..':p', 0, id)
  redis.call('HINCRBY', BB, 'tot', 1)
  if redis.call('HSET', BB..':nx', id, entry) == 1 then redis.call('HINCRBY', BB, 'nx', 1) end
end
-- add_members adds the (id, queue) pairs of ARGV from i as pending
-- members, skipping IDs that are members already, and returns the IDs
-- added.
local function add_members(BB, i)
  local added = {}
  for k = i, #ARGV, 2 do
    local id = ARGV[k]
    if redis.call('HSETNX', BB..':st', id, 'p' .. ARGV[k+1]) == 1 then
      redis.call('ZADD', BB..':p', 0, id)
      added[#added+1] = id
    end
  end
  redis.call('HINCRBY', BB, 'tot', #added)
  return added
end
`

// createBatchScript stores a batch's record and its members, all pending:
// KEYS = batch base; ARGV = id, name, allow failures (0 or 1), callbacks,
// then (member ID, queue) pairs. It returns 0, changing nothing, when the
// batch exists, and otherwise 1.
var createBatchScript = redis.NewScript(prelude + batchSide + `
local BB = KEYS[1]
if redis.call('EXISTS', BB) == 1 then return 0 end
redis.call('HSET', BB, 'id', ARGV[1], 'nm', ARGV[2], 'af', ARGV[3], 'cb', ARGV[4], 'cr', int(now_ms()),
  'tot', 0, 'don', 0, 'fai', 0, 'can', 0)
add_members(BB, 5)
return 1
`)

// indexBatchScript lists a batch for ListBatches: KEYS = {prefix}:batches,
// {prefix}:bseq; ARGV = id. The index is scored by a sequence, so that
// batches of one millisecond still list newest first.
var indexBatchScript = redis.NewScript(`
local s = redis.call('INCR', KEYS[2])
redis.call('ZADD', KEYS[1], s, ARGV[1])
return s
`)

// addToBatchScript adds pending members to an open batch: KEYS = batch
// base; ARGV = (member ID, queue) pairs. It returns {0} for an unknown
// batch, {2} for one cancelled or finished, and otherwise {1, the IDs
// added...}.
var addToBatchScript = redis.NewScript(prelude + batchSide + `
local BB = KEYS[1]
local v = redis.call('HMGET', BB, 'id', 'ca', 'fa')
if not v[1] then return {0} end
if v[2] or v[3] then return {2} end
local added = add_members(BB, 1)
table.insert(added, 1, 1)
return added
`)

// dropMembersScript takes back pending members that were never stored
// (their push was a duplicate): KEYS = batch base; ARGV = retention ms,
// then the IDs. It returns the record after marking what is due.
var dropMembersScript = redis.NewScript(prelude + batchSide + `
local BB = KEYS[1]
if not redis.call('HGET', BB, 'id') then return {} end
for k = 2, #ARGV do
  local v = redis.call('HGET', BB..':st', ARGV[k])
  if v and string.sub(v, 1, 1) == 'p' then
    redis.call('HDEL', BB..':st', ARGV[k])
    redis.call('ZREM', BB..':p', ARGV[k])
    redis.call('HINCRBY', BB, 'tot', -1)
  end
end
due(BB, now_ms(), tonumber(ARGV[1]))
return record(BB)
`)

// applyBatchScript applies members' outcomes to their batch (step 2):
// KEYS = batch base; ARGV = retention ms, then per event the member ID,
// outcome, reason, keep and the number of its steps, followed by each
// step's (ID, queue, packed push). A member moves by
// driver.MemberTransition's rule, or not at all (an event applied
// again); the first failure names the catch job's member and, without
// allow failures, cancels the batch. A pending member done while the
// batch runs (neither cancelled nor finished) first adds its steps (its
// chain's next step) as pending members, each with its push on :nx
// (step 3 pushes it), so that the batch never looks finished between a
// chain's steps; otherwise its steps are dropped: the chain ends with
// its batch.
// A done member's keep (the ms its result is kept, "" for none) is noted
// in :rk while the batch runs. It returns the record after marking what
// is due, followed by the places (from 1) of the events whose kept result
// is to be released now (no running batch keeps it), or {} for an
// unknown batch.
var applyBatchScript = redis.NewScript(prelude + batchSide + `
local BB = KEYS[1]
if not redis.call('HGET', BB, 'id') then return {} end
local now = now_ms()
local rel = {}
local e = 0
local k = 2
while k <= #ARGV do
  e = e + 1
  local id, oc, reason, rk, ns = ARGV[k], ARGV[k+1], ARGV[k+2], ARGV[k+3], tonumber(ARGV[k+4])
  local s0 = k + 5
  k = s0 + 3 * ns
  local v = redis.call('HGET', BB..':st', id)
  if v then
    local from, qn = string.sub(v, 1, 1), string.sub(v, 2)
    local to
    if oc == '0' and (from == 'p' or from == 'f') then to = 'd'
    elseif oc == '2' and from == 'p' then to = 'f'
    elseif oc == '3' and from == 'p' then to = 'c' end
    if to then
      if to == 'd' and from == 'p' and ns > 0 then
        local r = redis.call('HMGET', BB, 'ca', 'fa')
        if not r[1] and not r[2] then
          for s = s0, k - 1, 3 do add_step(BB, ARGV[s], ARGV[s+1], ARGV[s+2]) end
        end
      end
      if to == 'd' and rk ~= '' and not redis.call('HGET', BB, 'fa') then redis.call('HSET', BB..':rk', id, rk) end
      move(BB, id, from, to, qn)
      if to == 'f' then
        local r = redis.call('HMGET', BB, 'kf', 'af', 'ca', 'fa')
        if not r[1] then redis.call('HSET', BB, 'kf', id, 'kr', reason) end
        if r[2] ~= '1' and not r[3] and not r[4] then redis.call('HSET', BB, 'ca', int(now)) end
      end
    end
  end
  if rk ~= '' and redis.call('HEXISTS', BB..':rk', id) == 0 then rel[#rel+1] = e end
end
due(BB, now, tonumber(ARGV[1]))
local out = record(BB)
for _, x in ipairs(rel) do out[#out+1] = x end
return out
`)

// batchReleasesScript reads up to limit results a finished batch has to
// release: KEYS = batch base; ARGV = limit. It returns (entry, member ID,
// queue) triples; the caller takes each entry off :rl once released.
var batchReleasesScript = redis.NewScript(`
local BB = KEYS[1]
local out = {}
for _, en in ipairs(redis.call('LRANGE', BB..':rl', 0, tonumber(ARGV[1]) - 1)) do
  local c = string.find(en, ':', 1, true)
  local id = string.sub(en, c + 1)
  local v = redis.call('HGET', BB..':st', id)
  out[#out+1] = en
  out[#out+1] = id
  out[#out+1] = v and string.sub(v, 2) or ''
end
return out
`)

// batchStepsScript reads up to limit step pushes of a batch (step 3):
// KEYS = batch base; ARGV = limit. It returns (member ID, packed push)
// pairs of the steps still pending in a batch not cancelled, and takes
// off the others' pushes: a cancelled batch pushes no step (its pending
// ones are cancelled as its other members are, cancelMembersScript).
var batchStepsScript = redis.NewScript(`
local BB = KEYS[1]
local limit = tonumber(ARGV[1])
local out = {}
local ca = redis.call('HGET', BB, 'ca')
local kv = redis.call('HGETALL', BB..':nx')
for k = 1, #kv, 2 do
  local v = redis.call('HGET', BB..':st', kv[k])
  if not ca and v and string.sub(v, 1, 1) == 'p' then
    if #out < 2 * limit then
      out[#out+1] = kv[k]
      out[#out+1] = kv[k+1]
    end
  else
    redis.call('HDEL', BB..':nx', kv[k])
    redis.call('HINCRBY', BB, 'nx', -1)
  end
end
return out
`)

// stepPushedScript takes a step's push off the batch once it is known
// pushed (the end of step 3): KEYS = batch base; ARGV = retention ms, the
// step's member ID, "1" when the push stored it. A step never stored
// (its ID held by another job) is dropped from the members, still
// pending, so that the batch can finish. It returns the record after
// marking what is due, or {} for an unknown batch.
var stepPushedScript = redis.NewScript(prelude + batchSide + `
local BB = KEYS[1]
if not redis.call('HGET', BB, 'id') then return {} end
local id = ARGV[2]
if redis.call('HDEL', BB..':nx', id) == 1 then redis.call('HINCRBY', BB, 'nx', -1) end
if ARGV[3] ~= '1' then
  local v = redis.call('HGET', BB..':st', id)
  if v and string.sub(v, 1, 1) == 'p' then
    redis.call('HDEL', BB..':st', id)
    redis.call('ZREM', BB..':p', id)
    redis.call('HINCRBY', BB, 'tot', -1)
  end
end
due(BB, now_ms(), tonumber(ARGV[1]))
return record(BB)
`)

// cancelBatchScript marks a batch cancelled unless it has finished: KEYS =
// batch base. It returns the record, or {} for an unknown batch.
var cancelBatchScript = redis.NewScript(prelude + batchSide + `
local BB = KEYS[1]
local v = redis.call('HMGET', BB, 'id', 'ca', 'fa')
if not v[1] then return {} end
if not v[2] and not v[3] then redis.call('HSET', BB, 'ca', int(now_ms())) end
return record(BB)
`)

// pushedScript clears the due marks of callbacks known pushed: KEYS =
// batch base; ARGV = the marks (pt, pk, pf).
var pushedScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 1 then redis.call('HDEL', KEYS[1], unpack(ARGV)) end
return 1
`)

// membersScript reads one page of a batch's members in ID order: KEYS =
// batch base; ARGV = state (p, d, f, c, or "" for all), the last ID of
// the previous page ("" for none), limit. It returns {0} for an unknown
// batch, and otherwise 1 followed by (ID, state) pairs: up to limit from
// each state's set, merged by the caller.
var membersScript = redis.NewScript(`
local BB = KEYS[1]
if redis.call('EXISTS', BB) == 0 then return {0} end
local from = '-'
if ARGV[2] ~= '' then from = '(' .. ARGV[2] end
local states = {'p', 'd', 'f', 'c'}
if ARGV[1] ~= '' then states = {ARGV[1]} end
local out = {1}
for _, s in ipairs(states) do
  for _, id in ipairs(redis.call('ZRANGEBYLEX', BB..':'..s, from, '+', 'LIMIT', 0, tonumber(ARGV[3]))) do
    out[#out+1] = id
    out[#out+1] = s
  end
end
return out
`)

// pendingMembersScript reads up to limit pending members of a batch with
// their queues: KEYS = batch base; ARGV = limit. It returns (ID, queue)
// pairs.
var pendingMembersScript = redis.NewScript(`
local BB = KEYS[1]
local out = {}
for _, id in ipairs(redis.call('ZRANGE', BB..':p', 0, tonumber(ARGV[1]) - 1)) do
  local v = redis.call('HGET', BB..':st', id)
  if v then
    out[#out+1] = id
    out[#out+1] = string.sub(v, 2)
  end
end
return out
`)

// cancelMembersScript cancels members of a cancelled batch in one queue
// (step 1 of their cancel): KEYS = ids, base, the cancel log; ARGV =
// batch ID, stamp (ms), the cancel log's keep (ms) and cap (control.go),
// then member IDs. A waiting or running member is deleted (a running
// one's lease is then lost, and written to the cancel log, so that its
// Worker stops the handler as after Controller.Cancel) and noted
// cancelled in the outbox; a member whose job is gone with no event in
// the outbox (its push never happened: a dispatch cut short, or a
// chain's next step not yet pushed by step 3) is noted cancelled too,
// and the guard of a step's push put in <base>:once, so that a push of
// it still under way stores nothing; a dead or finished one is left to
// its own event. It returns how many it noted.
var cancelMembersScript = redis.NewScript(prelude + batchPrelude + controlLua + `
local ids, B, clog, bid = KEYS[1], KEYS[2], KEYS[3], ARGV[1]
local stamp = tonumber(ARGV[2])
local n = 0
for k = 5, #ARGV do
  local id = ARGV[k]
  local jk = B..':j:'..id
  local st = redis.call('HGET', jk, 'st')
  if st == 'r' or st == 's' or st == 'x' or st == 'g' then
    if st == 'x' then
      redis.call('ZREM', B..':run', id)
      log_cancel(clog, id, redis.call('HGET', jk, 'tk'), stamp)
    else
      unready(B, id, jk, st)
    end
    free_key(B, jk, id)
    drop(ids, B, jk, id)
    redis.call('HINCRBY', B..':stats', 'cancelled', 1)
    note_member(B, bid, id, 3, '')
    n = n + 1
  elseif not st and not noted(B, id) then
    redis.call('ZADD', B..':once', int(now_ms()), bid .. '\0step\0' .. id)
    note_member(B, bid, id, 3, '')
    n = n + 1
  end
end
trim_log(clog, stamp, tonumber(ARGV[3]), tonumber(ARGV[4]))
return n
`)

// pushOnceScript pushes a job once, whatever the retries: a batch's
// callback or chain step (step 3) or a chain's next step noted in an
// outbox (chain.go). KEYS = ids, queues, the job's queue's base; ARGV =
// channel, guard (a batch's ID and event, or the completed job's lease
// and the push's place), then the job's pushFields, then the guard's
// retention in ms, and optionally "1" to note a push that stored nothing
// beside the guard (as guard.."\0skip"). The guard stays in <base>:once
// for that long so that a push run again after a crash stores nothing.
// It returns {1, push_one's status} when it pushed (status 1 stored, 0
// an active job of the ID, 2 or 3 a unique key held), {0} when the guard
// was there, or {0, 0} when it was and the push it guards was noted as
// having stored nothing.
var pushOnceScript = redis.NewScript(prelude + `
local ids, qset, B = KEYS[1], KEYS[2], KEYS[3]
local now = now_ms()
local keep = tonumber(ARGV[3 + ` + itoa(pushFields) + `])
redis.call('ZREMRANGEBYSCORE', B..':once', '-inf', int(now - keep))
if redis.call('ZSCORE', B..':once', ARGV[2]) then
  if redis.call('ZSCORE', B..':once', ARGV[2] .. '\0skip') then return {0, 0} end
  return {0}
end
local st, _, ready = push_one(ids, qset, now, 3)
redis.call('ZADD', B..':once', int(now), ARGV[2])
if st ~= 1 and ARGV[4 + ` + itoa(pushFields) + `] == '1' then
  redis.call('ZADD', B..':once', int(now), ARGV[2] .. '\0skip')
end
local woke = {}
if ready then woke[ARGV[4]] = true end
publish(ARGV[1], woke)
return {1, st}
`)
