package redisqueue

import (
	"strconv"

	"github.com/redis/go-redis/v9"
)

// Every state change is one of the Lua scripts below, run with EVALSHA
// (go-redis' Script.Run sends the source once on NOSCRIPT). A script runs
// atomically: the job's hash, the sets that order it, the unique keys and
// the ID index change together or not at all. The scripts validate
// nothing that could fail half way: the Go side checks every argument
// first, so a script never stops after its first write.
//
// The per-queue state counts are the cardinalities of the state sets
// (ready, sched, run, dead), which the same scripts change with the job
// (a scheduled job is in sched, by time, and in sord, in claim order);
// the cumulative totals in <queue>:stats are HINCRBY'd beside them.
//
// Times are milliseconds of the Redis server's clock (TIME), so every
// process agrees on when a lease ends. Numbers written back are formatted
// with %d: Lua's own number-to-string conversion keeps 14 digits only.

// prelude is the helpers every script shares.
const prelude = `
local OFF = 1000000000000000
local function int(n) return string.format('%d', n) end
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
-- rmember is a job's member of the ready set: the set is scored by
-- -priority, and members of one score sort by bytes, so the member leads
-- with the fixed-width available-at and insertion sequence.
local function rmember(av, sq, id)
  return string.format('%016d%016d', av + OFF, sq) .. id
end
local JF = {'id','q','n','p','pr','a','ma','to','uk','tg','md','av','cr','le','tk','ex','sn','rc','ru'}
-- enqueue puts the job on its ready or scheduled set by its available-at
-- and reports whether it is ready now.
local function enqueue(B, id, jk, av, now)
  local v = redis.call('HMGET', jk, 'pr', 'sq')
  if av <= now then
    redis.call('ZADD', B..':ready', int(-tonumber(v[1])), rmember(av, tonumber(v[2]), id))
    redis.call('HSET', jk, 'st', 'r')
    return true
  end
  redis.call('ZADD', B..':sched', int(av), id)
  redis.call('ZADD', B..':sord', int(-tonumber(v[1])), rmember(av, tonumber(v[2]), id))
  redis.call('HSET', jk, 'st', 's')
  return false
end
-- unsched takes the scheduled job off its two sets: sched (by time) and
-- sord (in claim order, for inspection's lists).
local function unsched(B, id, jk)
  redis.call('ZREM', B..':sched', id)
  local v = redis.call('HMGET', jk, 'av', 'sq')
  if v[1] then redis.call('ZREM', B..':sord', rmember(tonumber(v[1]), tonumber(v[2]), id)) end
end
-- Groups (scripts_group.go): a member's state is 'g' and its hash holds
-- its group key (gk). gkey is the key of a group's members, scored by
-- their insertion sequence; the group's name and key make it, the name
-- with its length first so that no two groups share it.
local function gkey(B, name, gk)
  return B..':gm:'..#name..':'..name..':'..gk
end
-- group_of returns the group key a job's meta (JSON) names, or nil.
local function group_of(md)
  if md == '' or not string.find(md, '"meridian.group":', 1, true) then return nil end
  local ok, m = pcall(cjson.decode, md)
  if ok and type(m) == 'table' and type(m['meridian.group']) == 'string' and m['meridian.group'] ~= '' then
    return m['meridian.group']
  end
  return nil
end
-- regroup sets the indexes of the groups of name in queue B from the
-- group gk's members: <B>:gl:<name> scores each group by its newest
-- member's creation (ms), <B>:gf:<name> by its oldest one's, <B>:gn:<name>
-- by its size; a group without members leaves the three.
local function regroup(B, name, gk)
  local G = gkey(B, name, gk)
  local L, F, N = B..':gl:'..name, B..':gf:'..name, B..':gn:'..name
  local n = redis.call('ZCARD', G)
  if n == 0 then
    redis.call('ZREM', L, gk)
    redis.call('ZREM', F, gk)
    redis.call('ZREM', N, gk)
    return
  end
  local f = redis.call('ZRANGE', G, 0, 0)[1]
  local l = redis.call('ZRANGE', G, -1, -1)[1]
  redis.call('ZADD', L, redis.call('HGET', B..':j:'..l, 'cr') or '0', gk)
  redis.call('ZADD', F, redis.call('HGET', B..':j:'..f, 'cr') or '0', gk)
  redis.call('ZADD', N, n, gk)
end
-- group keeps the stored job id as a member of group gk of its name: in
-- the group, in <B>:grp (every member of the queue, in claim order, for
-- counts and lists) and in the group's indexes.
local function group(B, id, jk, name, gk)
  redis.call('HSET', jk, 'st', 'g', 'gk', gk)
  local v = redis.call('HMGET', jk, 'pr', 'av', 'sq')
  redis.call('ZADD', B..':grp', int(-tonumber(v[1])), rmember(tonumber(v[2]), tonumber(v[3]), id))
  redis.call('ZADD', gkey(B, name, gk), v[3], id)
  regroup(B, name, gk)
end
-- ungroup takes the member id out of its group (cancelled or purged).
local function ungroup(B, id, jk)
  local v = redis.call('HMGET', jk, 'n', 'gk', 'av', 'sq')
  if not v[2] then return end
  redis.call('ZREM', B..':grp', rmember(tonumber(v[3]), tonumber(v[4]), id))
  redis.call('ZREM', gkey(B, v[1] or '', v[2]), id)
  regroup(B, v[1] or '', v[2])
end
-- unready takes the waiting (ready, scheduled, grouped or sequenced) job
-- off its set; a sequence member keeps its place (unseat takes it).
local function unready(B, id, jk, st)
  if st == 's' then
    unsched(B, id, jk)
  elseif st == 'g' then
    ungroup(B, id, jk)
  elseif st == 'w' then
    local v = redis.call('HMGET', jk, 'av', 'sq')
    redis.call('ZREM', B..':sqw', rmember(tonumber(v[1]), tonumber(v[2]), id))
  else
    local v = redis.call('HMGET', jk, 'av', 'sq')
    redis.call('ZREM', B..':ready', rmember(tonumber(v[1]), tonumber(v[2]), id))
  end
end
-- Sequences (sequence.go): a member that holds a place in its sequence
-- has its key in its hash (field sk); <B>:sl:<key> lists the places in
-- push order, the head (ready, scheduled, running, or a dead letter that
-- holds the sequence) first. A member waiting behind its head is in state
-- 'w' and in <B>:sqw (the queue's waiting members, in claim order).
-- seq_of returns the sequence key a job's meta (JSON) names, or nil.
local function seq_of(md)
  if md == '' or not string.find(md, '"meridian.sequence":', 1, true) then return nil end
  local ok, m = pcall(cjson.decode, md)
  if ok and type(m) == 'table' and type(m['meridian.sequence']) == 'string' and m['meridian.sequence'] ~= '' then
    return m['meridian.sequence']
  end
  return nil
end
-- leave_seq takes the job id out of its sequence sk, where it holds a
-- place. When it was the head, the next member becomes ready (or
-- scheduled, at its own available-at): it reports whether one became
-- ready now, and notes its queue in promoted. A member whose hash is
-- gone is skipped.
-- promoted collects the queues in which leave_seq made a member ready
-- (a local of the script's run); publish publishes them and the queues
-- of woke (name -> true) on the wake-up channel ch, each once, so that
-- the Waits on them look again at once (wait.go). Every script that may
-- end a head ends with it.
local promoted = {}
local function publish(ch, woke)
  for qn in pairs(woke) do redis.call('PUBLISH', ch, qn) end
  for qn in pairs(promoted) do
    if not woke[qn] then redis.call('PUBLISH', ch, qn) end
  end
end
local function leave_seq(B, id, sk, now)
  local L = B..':sl:'..sk
  if redis.call('LINDEX', L, 0) ~= id then
    redis.call('LREM', L, 1, id)
    return false
  end
  redis.call('LPOP', L)
  while true do
    local nx = redis.call('LINDEX', L, 0)
    if not nx then return false end
    local njk = B..':j:'..nx
    local v = redis.call('HMGET', njk, 'st', 'av', 'sq')
    if v[1] then
      if v[1] ~= 'w' then return false end
      redis.call('ZREM', B..':sqw', rmember(tonumber(v[2]), tonumber(v[3]), nx))
      if not enqueue(B, nx, njk, tonumber(v[2]), now) then return false end
      promoted[redis.call('HGET', njk, 'q')] = true
      return true
    end
    redis.call('LPOP', L)
  end
end
-- unseat takes the job whose hash is jk out of its sequence, if it holds
-- a place in one (cancelled, deleted), before the hash goes: leave_seq's
-- answer, or false.
local function unseat(B, id, jk, now)
  local sk = redis.call('HGET', jk, 'sk')
  if sk then return leave_seq(B, id, sk, now) end
  return false
end
-- holds_dead reports whether the job whose hash is jk keeps its unique
-- key as a dead letter (driver.Job.UniqueStates names dead: its field uh,
-- the held states' letters, has a d).
local function holds_dead(jk)
  local uh = redis.call('HGET', jk, 'uh')
  return uh and string.find(uh, 'd', 1, true) ~= nil
end
-- free_key releases the job's unique key if it holds it.
local function free_key(B, jk, id)
  local uk = redis.call('HGET', jk, 'uk')
  if uk and redis.call('HGET', B..':uniq', uk) == id then
    redis.call('HDEL', B..':uniq', uk)
  end
end
-- drop deletes the job and its index entry.
local function drop(ids, B, jk, id)
  redis.call('DEL', jk)
  if redis.call('HGET', ids, id) == B then redis.call('HDEL', ids, id) end
end
-- leased returns the key of the job id when tok is its current lease.
local function leased(B, id, tok, now)
  local jk = B..':j:'..id
  local v = redis.call('HMGET', jk, 'st', 'tk', 'ex')
  if v[1] ~= 'x' or v[2] ~= tok or (tonumber(v[3]) or 0) <= now then return nil end
  return jk
end
-- push_one stores one job whose fields start at ARGV[i] (see pushArgs)
-- and returns a status (1 stored, 0 active ID, 2 unique key held, 3 key
-- held by UniqueFor), the holder's ID, and whether the job is ready now.
-- The unique mode ARGV[i+10] is "1" to replace a waiting holder, else
-- "0", then the letters of the finished states the job holds its key in
-- (d: dead).
local function push_one(ids, qset, now, i)
  local id, qn, B = ARGV[i], ARGV[i+1], KEYS[tonumber(ARGV[i+2])]
  local uk, ufor = ARGV[i+8], tonumber(ARGV[i+9])
  local urep, uh = string.sub(ARGV[i+10], 1, 1), string.sub(ARGV[i+10], 2)
  local old = redis.call('HGET', ids, id)
  local ojk, ocr
  if old then
    ojk = old..':j:'..id
    local ost = redis.call('HGET', ojk, 'st')
    if ost == 'd' then
      ocr = redis.call('HGET', ojk, 'cr')
    elseif ost then
      return 0, id, false
    end
  end
  if uk ~= '' then
    local holder = redis.call('HGET', B..':uniq', uk)
    local hst
    if holder then
      hst = redis.call('HGET', B..':j:'..holder, 'st')
      if not hst then
        redis.call('HDEL', B..':uniq', uk)
        holder = nil
      elseif holder == id and ocr then
        -- A dead letter that holds the key, revived by a push of its
        -- own ID: its hold never stands in its way.
        holder = nil
      end
    end
    if holder then
      if urep == '1' and (hst == 'r' or hst == 's') then
        local hjk = B..':j:'..holder
        unready(B, holder, hjk, hst)
        unseat(B, holder, hjk, now)
        redis.call('HDEL', B..':uniq', uk)
        drop(ids, B, hjk, holder)
      else
        return 2, holder, false
      end
    else
      redis.call('ZREMRANGEBYSCORE', B..':ufor', '-inf', int(now))
      if redis.call('ZSCORE', B..':ufor', uk) then return 3, '', false end
    end
  end
  local sk = seq_of(ARGV[i+12])
  local seated = false
  if ocr then
    redis.call('ZREM', old..':dead', id)
    free_key(old, ojk, id)
    -- A dead head revived as a member of its own sequence keeps its
    -- place (it runs again as the head); otherwise it leaves it.
    local osk = redis.call('HGET', ojk, 'sk')
    if osk then
      if old == B and osk == sk and redis.call('LINDEX', B..':sl:'..sk, 0) == id then
        seated = true
      else
        leave_seq(old, id, osk, now)
      end
    end
    redis.call('DEL', ojk)
  end
  local jk = B..':j:'..id
  local sq = redis.call('INCR', B..':seq')
  local av = now
  if ARGV[i+13] ~= '' then av = tonumber(ARGV[i+13]) end
  local cr = ARGV[i+14]
  if cr == '' then cr = ocr or int(now) end
  redis.call('HSET', jk, 'id', id, 'q', qn, 'n', ARGV[i+3], 'p', ARGV[i+4], 'pr', ARGV[i+5],
    'a', 0, 'sq', sq, 'av', int(av), 'cr', cr, 'sn', 0)
  -- Fields at their zero value are left out: numbers at 0, strings empty.
  local opt = {'ma', ARGV[i+6], '0', 'to', ARGV[i+7], '0', 'uk', uk, '', 'tg', ARGV[i+11], '', 'md', ARGV[i+12], '', 'ru', ARGV[i+15], '', 'uh', uh, ''}
  for k = 1, #opt, 3 do
    if opt[k+1] ~= '' and opt[k+1] ~= opt[k+2] then redis.call('HSET', jk, opt[k], opt[k+1]) end
  end
  redis.call('HSET', ids, id, B)
  -- On a Cluster the registry is written outside the script, and qset
  -- names the queue's own ID index (cluster.go).
  if qset ~= ids then redis.call('SADD', qset, qn) end
  if uk ~= '' then
    redis.call('HSET', B..':uniq', uk, id)
    if ufor > 0 then redis.call('ZADD', B..':ufor', int(now + ufor), uk) end
  end
  local gk = group_of(ARGV[i+12])
  if gk then
    group(B, id, jk, ARGV[i+3], gk)
    return 1, '', false
  end
  if sk then
    redis.call('HSET', jk, 'sk', sk)
    if not seated and redis.call('RPUSH', B..':sl:'..sk, id) > 1 then
      redis.call('HSET', jk, 'st', 'w')
      redis.call('ZADD', B..':sqw', int(-tonumber(ARGV[i+5])), rmember(av, sq, id))
      return 1, '', false
    end
  end
  return 1, '', enqueue(B, id, jk, av, now)
end
`

// pushFields is how many ARGV entries push_one reads per job.
const pushFields = 16

// pushScript stores jobs: KEYS = ids, queues, then the queues' bases;
// ARGV = channel, n, then n jobs of pushFields each, then pairs of a job's
// index (from 0) and its Actions as the JSON of the field ac, written on
// the jobs stored. It returns a status and a holder per job, and publishes
// each queue that got a ready job.
var pushScript = redis.NewScript(prelude + `
local ids, qset = KEYS[1], KEYS[2]
local now = now_ms()
local n = tonumber(ARGV[2])
local out, woke = {}, {}
for k = 0, n - 1 do
  local i = 3 + k * ` + itoa(pushFields) + `
  local st, holder, ready = push_one(ids, qset, now, i)
  out[#out+1] = st
  out[#out+1] = holder
  if ready then woke[ARGV[i+1]] = true end
end
local a = 3 + n * ` + itoa(pushFields) + `
while ARGV[a] do
  local k = tonumber(ARGV[a])
  if out[2*k+1] == 1 then
    local i = 3 + k * ` + itoa(pushFields) + `
    redis.call('HSET', KEYS[tonumber(ARGV[i+2])]..':j:'..ARGV[i], 'ac', ARGV[a+1])
  end
  a = a + 2
end
publish(ARGV[1], woke)
return out
`)

// reserveScript leases up to n ready jobs of one queue: KEYS = base;
// ARGV = n, lease ms, token head, token tail, attempts to add to a job
// with no lease before it (0 or 1), promote limit, "peek" to lease nothing
// and return the best n members of ready with their scores instead, and
// attempts to add to a job taken back from an expired lease (marked rc). Due scheduled jobs and jobs whose lease expired move to
// ready first; an expired one keeps its available-at and sequence, so its
// place, and is marked recovered. A paused queue (<base>:paused) then
// leases, and peeks, nothing.
var reserveScript = redis.NewScript(prelude + `
local B = KEYS[1]
local now = now_ms()
local n, lease, inc, lim, rinc = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[8])
local due = redis.call('ZRANGEBYSCORE', B..':sched', '-inf', int(now), 'LIMIT', 0, lim)
-- A member whose job hash is gone (deleted by hand, or evicted under a
-- maxmemory policy that evicts) is dropped rather than revived half made.
for _, id in ipairs(due) do
  local jk = B..':j:'..id
  unsched(B, id, jk)
  local av = tonumber(redis.call('HGET', jk, 'av'))
  if av then enqueue(B, id, jk, av, now) end
end
local gone = redis.call('ZRANGEBYSCORE', B..':run', '-inf', int(now), 'LIMIT', 0, lim)
for _, id in ipairs(gone) do
  local jk = B..':j:'..id
  redis.call('ZREM', B..':run', id)
  local av = tonumber(redis.call('HGET', jk, 'av'))
  if av then
    redis.call('HDEL', jk, 'tk', 'ex')
    redis.call('HSET', jk, 'rc', 1)
    enqueue(B, id, jk, av, now)
  end
end
-- A paused queue (Pause) leases nothing, and a peek finds nothing in it.
if redis.call('EXISTS', B..':paused') == 1 then return {} end
if ARGV[7] == 'peek' then
  return redis.call('ZRANGE', B..':ready', 0, n - 1, 'WITHSCORES')
end
local ms = redis.call('ZRANGE', B..':ready', 0, n - 1)
local exp = int(now + lease)
local out = {}
for i, m in ipairs(ms) do
  local id = string.sub(m, 33)
  local jk = B..':j:'..id
  redis.call('ZREM', B..':ready', m)
  if redis.call('EXISTS', jk) == 1 then
    redis.call('HSET', jk, 'st', 'x', 'tk', ARGV[3] .. i .. ARGV[4], 'ex', exp)
    local add = inc
    if rinc ~= inc and redis.call('HEXISTS', jk, 'rc') == 1 then add = rinc end
    if add > 0 then redis.call('HINCRBY', jk, 'a', add) end
    redis.call('ZADD', B..':run', exp, id)
    out[#out+1] = redis.call('HMGET', jk, unpack(JF))
    redis.call('HDEL', jk, 'rc')
  end
end
return out
`)

// completeScript counts starts and records outcomes: KEYS = ids, queues,
// then bases; ARGV = channel, number of starts, the starts (base index,
// id, token), number of outcomes, the outcomes (base index, id, token,
// outcome, at ms or "", reason, counted (a snooze's "1" or "0"; a dead
// letter's attempt limit, stored as its max attempts when above 0),
// batch or "", result or "", result's expiry ms or "", sequence key or
// "", "1" when its dead-lettering releases the sequence, graph or "",
// number of pushes, the pushes). A done or cancelled outcome with a sequence key,
// and a failed one that releases, take the job out of its sequence: the
// next member becomes ready. A done outcome's result is stored at base:r:id (in the
// job's slot) until its expiry, by the script's clock; a graph node's or
// batch member's is stored without expiry, its graph or batch releasing
// it (scripts_graph.go, scripts_batch.go).
// A batch member's or graph node's done, failed or cancelled outcome is
// also noted in its queue's outbox (scripts_batch.go, scripts_graph.go). It returns the indexes
// (from 1) of the lost starts and a status per outcome: 1 recorded, 0
// lease lost, 2 unknown outcome. A push into the job's own queue is
// stored by the script; one into another queue (another slot on a
// Cluster) is noted in the outbox and stored by the next step (chain.go).
// A batch member's done outcome with pushes (its chain's next step) is
// neither: the pushes ride in the member's event, and its batch adds and
// pushes them (scripts_batch.go).
var completeScript = redis.NewScript(prelude + batchPrelude + `
local ids, qset = KEYS[1], KEYS[2]
local now = now_ms()
local woke = {}
local i = 1
local function arg() i = i + 1; return ARGV[i] end
local lost = {}
local ns = tonumber(arg())
for s = 1, ns do
  local B, id, tok = KEYS[tonumber(arg())], arg(), arg()
  local jk = leased(B, id, tok, now)
  if jk then redis.call('HINCRBY', jk, 'a', 1) else lost[#lost+1] = s end
end
local codes = {}
local no = tonumber(arg())
for o = 1, no do
  local B, id, tok, oc, at, reason, counted, bid, res, rexp, sk, srel, gid, np = KEYS[tonumber(arg())], arg(), arg(), tonumber(arg()), arg(), arg(), arg(), arg(), arg(), arg(), arg(), arg(), arg(), tonumber(arg())
  local first = i + 1
  i = i + np * ` + itoa(pushFields) + `
  local jk = leased(B, id, tok, now)
  if not jk then
    codes[o] = 0
  elseif oc < 0 or oc > 4 then
    codes[o] = 2
  else
    codes[o] = 1
    redis.call('ZREM', B..':run', id)
    local keep = ''
    if oc == 0 and rexp ~= '' and tonumber(rexp) > now then
      if gid ~= '' or bid ~= '' then
        -- A graph node's or batch member's result is kept until its
        -- graph or batch has finished (step 2 of scripts_graph.go and
        -- scripts_batch.go), then for keep ms.
        keep = int(tonumber(rexp) - now)
        redis.call('SET', B..':r:'..id, res)
      else
        redis.call('SET', B..':r:'..id, res, 'PX', int(tonumber(rexp) - now))
      end
    end
    if oc == 0 or oc == 3 then
      if sk ~= '' then leave_seq(B, id, sk, now) end
      free_key(B, jk, id)
      drop(ids, B, jk, id)
      redis.call('HINCRBY', B..':stats', oc == 0 and 'done' or 'cancelled', 1)
    elseif oc == 2 then
      if not holds_dead(jk) then free_key(B, jk, id) end
      redis.call('HDEL', jk, 'tk', 'ex')
      redis.call('HSET', jk, 'st', 'd', 'le', reason, 'dd', int(now))
      if tonumber(counted) > 0 then redis.call('HSET', jk, 'ma', counted) end
      redis.call('ZADD', B..':dead', int(now), id)
      redis.call('HINCRBY', B..':stats', 'dead', 1)
      if sk ~= '' and srel == '1' then
        leave_seq(B, id, sk, now)
        redis.call('HDEL', jk, 'sk')
      end
    else
      local t = now
      if at ~= '' and tonumber(at) > now then t = tonumber(at) end
      redis.call('HDEL', jk, 'tk', 'ex')
      redis.call('HSET', jk, 'av', int(t))
      if oc == 1 then
        redis.call('HSET', jk, 'le', reason)
        redis.call('HINCRBY', B..':stats', 'retried', 1)
      else
        local a = tonumber(redis.call('HGET', jk, 'a'))
        if a > 0 then redis.call('HSET', jk, 'a', a - 1) end
        if counted == '1' then redis.call('HINCRBY', jk, 'sn', 1) end
      end
      if enqueue(B, id, jk, t, now) then woke[redis.call('HGET', jk, 'q')] = true end
    end
    -- A batch member's done outcome takes its pushes (a chain's next
    -- step) into its event: its batch adds them as members and pushes
    -- them (step 2 of scripts_batch.go), or not, as it decides.
    local steps = bid ~= '' and oc == 0 and np > 0
    if bid ~= '' and (oc == 0 or oc == 2 or oc == 3) then
      local nx = {}
      if steps then
        for p = 0, np - 1 do
          local pi = first + p * ` + itoa(pushFields) + `
          for k = 0, ` + itoa(pushFields) + ` - 1 do nx[#nx+1] = ARGV[pi+k] end
          nx[#nx - ` + itoa(pushFields) + ` + 3] = ''
        end
      end
      note_member(B, bid, id, oc, reason, keep, nx)
    end
    if gid ~= '' and (oc == 0 or oc == 2 or oc == 3) then note_node(B, gid, id, oc, keep) end
    if (oc == 0 or oc == 2) and not steps then
      for p = 0, np - 1 do
        local pi = first + p * ` + itoa(pushFields) + `
        if KEYS[tonumber(ARGV[pi+2])] == B then
          local st, _, ready = push_one(ids, qset, now, pi)
          if ready then woke[ARGV[pi+1]] = true end
        else
          note_push(ids, B, id .. ':' .. tok .. ':' .. p, pi)
        end
      end
    end
  end
end
publish(ARGV[1], woke)
return {lost, codes}
`)

// extendScript sets the expiry of current leases to now plus d: KEYS =
// bases; ARGV = d ms, then (base index, id, token) per lease. It returns
// the indexes (from 1) of the lost leases.
var extendScript = redis.NewScript(prelude + `
local now = now_ms()
local exp = int(now + tonumber(ARGV[1]))
local lost = {}
local n = (#ARGV - 1) / 3
for k = 0, n - 1 do
  local B, id, tok = KEYS[tonumber(ARGV[2 + k*3])], ARGV[3 + k*3], ARGV[4 + k*3]
  local jk = leased(B, id, tok, now)
  if jk then
    redis.call('HSET', jk, 'ex', exp)
    redis.call('ZADD', B..':run', exp, id)
  else
    lost[#lost+1] = k + 1
  end
end
return lost
`)

// retryDeadScript moves a dead letter back to ready: KEYS = ids; ARGV =
// id, channel. It returns {1} when moved, {0} when id is not a dead
// letter, {2, holder} when its unique key is held by another active job.
// ActOn's bulkScript shares its retry_dead (scripts_control.go).
var retryDeadScript = redis.NewScript(prelude + batchPrelude + controlLua + `
local code, v = retry_dead(KEYS[1], ARGV[1], now_ms())
if code == 1 then
  redis.call('PUBLISH', ARGV[2], v)
  return {1}
end
if code == 2 then return {2, v} end
return {0}
`)

// forgetDeadScript deletes a dead letter: KEYS = ids; ARGV = id, channel.
// It returns 1 when deleted, 0 when id is not a dead letter, and
// publishes the queue of a sequence member it made ready.
var forgetDeadScript = redis.NewScript(prelude + batchPrelude + controlLua + `
local n = forget_dead(KEYS[1], ARGV[1])
publish(ARGV[2], {})
return n
`)

// flushDeadScript deletes up to limit dead letters of one queue, freeing
// the unique keys they hold: KEYS = ids, base; ARGV = limit, channel. It
// returns how many it deleted, and publishes the queue when a sequence
// member became ready.
var flushDeadScript = redis.NewScript(prelude + `
local ids, B = KEYS[1], KEYS[2]
local now = now_ms()
local dead = redis.call('ZRANGE', B..':dead', 0, tonumber(ARGV[1]) - 1)
for _, id in ipairs(dead) do
  redis.call('ZREM', B..':dead', id)
  unseat(B, id, B..':j:'..id, now)
  free_key(B, B..':j:'..id, id)
  drop(ids, B, B..':j:'..id, id)
end
publish(ARGV[2], {})
return #dead
`)

// purgeScript deletes up to limit waiting sequence members, up to limit
// ready, up to limit scheduled and up to limit grouped jobs of one queue: KEYS = ids, base; ARGV = limit, channel. A
// batch member or graph node is noted cancelled in the queue's outbox,
// so that its batch or graph counts it. It returns how many it deleted,
// and publishes the queue when a sequence member became ready (one behind
// the first limit waiting, or pushed meanwhile).
var purgeScript = redis.NewScript(prelude + batchPrelude + `
local ids, B = KEYS[1], KEYS[2]
local lim = tonumber(ARGV[1])
local now = now_ms()
local n = 0
local function purge_one(jk, id)
  local bid, gid = batch_of(jk), graph_of(jk)
  if bid then note_member(B, bid, id, 3, '') end
  if gid then note_node(B, gid, id, 3, '') end
  if bid or gid then redis.call('HINCRBY', B..':stats', 'cancelled', 1) end
  unseat(B, id, jk, now)
  free_key(B, jk, id)
  drop(ids, B, jk, id)
end
-- Waiting sequence members go first, so that a head purged below makes
-- none of them ready.
for _, m in ipairs(redis.call('ZRANGE', B..':sqw', 0, lim - 1)) do
  local id = string.sub(m, 33)
  redis.call('ZREM', B..':sqw', m)
  purge_one(B..':j:'..id, id)
  n = n + 1
end
for _, m in ipairs(redis.call('ZRANGE', B..':ready', 0, lim - 1)) do
  local id = string.sub(m, 33)
  local jk = B..':j:'..id
  redis.call('ZREM', B..':ready', m)
  purge_one(jk, id)
  n = n + 1
end
for _, id in ipairs(redis.call('ZRANGE', B..':sched', 0, lim - 1)) do
  local jk = B..':j:'..id
  unsched(B, id, jk)
  purge_one(jk, id)
  n = n + 1
end
for _, m in ipairs(redis.call('ZRANGE', B..':grp', 0, lim - 1)) do
  local id = string.sub(m, 33)
  local jk = B..':j:'..id
  redis.call('ZREM', B..':grp', m)
  ungroup(B, id, jk)
  purge_one(jk, id)
  n = n + 1
end
publish(ARGV[2], {})
return n
`)

func itoa(n int) string { return strconv.Itoa(n) }
