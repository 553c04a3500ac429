package redisqueue

import "github.com/redis/go-redis/v9"

// The scripts of inspection. They only read, so they run with EVALSHA_RO
// (on a replica too, where the client sends reads there), and each one is
// bounded by its arguments: a list call examines at most its budget of
// jobs, however many the queues hold.

// listPrelude is what the list script adds to prelude: comparing order
// keys, seeking a key in a sorted set, and the sources that yield a
// queue's jobs of one state in list order.
//
// An order key is (score, member) as the state's sorted set holds it.
// Waiting and running jobs are in claim order: the score is -priority and
// the member is rmember's (available-at and sequence in 32 fixed-width
// digits, then the ID), both ascending. Dead letters (and any state kept
// by finish time) are newest first: the score is the time in ms and the
// member the ID, both descending. Members compare byte by byte, as Redis
// orders them: Lua's own < follows the server's locale.
const listPrelude = `
-- JFX is the fields inspection reads of a job: JF, then st and dd.
local JFX = {unpack(JF)}
JFX[#JFX+1] = 'st'
JFX[#JFX+1] = 'dd'
local function bless(a, b)
  local n = math.min(#a, #b)
  for i = 1, n do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x < y end
  end
  return #a < #b
end
local desc = false
local function before(s1, m1, s2, m2)
  if s1 ~= s2 then
    if desc then return s1 > s2 end
    return s1 < s2
  end
  if desc then return bless(m2, m1) end
  return bless(m1, m2)
end
-- avof is the available-at of an rmember.
local function avof(m) return tonumber(string.sub(m, 1, 16)) - OFF end
-- seek_asc is the rank of the first member of Z after (s, m), ascending.
local function seek_asc(Z, s, m)
  local lo = redis.call('ZCOUNT', Z, '-inf', '(' .. int(s))
  local hi = redis.call('ZCOUNT', Z, '-inf', int(s))
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    local e = redis.call('ZRANGE', Z, mid, mid)[1]
    if not e or bless(m, e) then hi = mid else lo = mid + 1 end
  end
  return lo
end
-- seek_desc is the reverse rank of the first member of Z after (s, m),
-- descending.
local function seek_desc(Z, s, m)
  local lo = redis.call('ZCOUNT', Z, '(' .. int(s), '+inf')
  local hi = redis.call('ZCOUNT', Z, int(s), '+inf')
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    local e = redis.call('ZREVRANGE', Z, mid, mid)[1]
    if not e or bless(e, m) then hi = mid else lo = mid + 1 end
  end
  return lo
end
-- reader returns a function giving the member and score at a rank of Z,
-- read 64 at a time.
local function reader(Z, rev)
  local from, buf = -1, {}
  return function(r)
    if from < 0 or r < from or r >= from + #buf / 2 then
      buf = redis.call(rev and 'ZREVRANGE' or 'ZRANGE', Z, r, r + 63, 'WITHSCORES')
      from = r
    end
    local k = (r - from) * 2 + 1
    if buf[k] then return buf[k], tonumber(buf[k + 1]) end
    return nil
  end
end
-- A source yields the order keys of one queue's jobs in list order:
-- peek returns the next (score, member) or nil, pop moves past it.
--
-- ranked is the members of Z from rank r on (reverse ranks when rev).
local function ranked(B, Z, rev, r)
  local at = reader(Z, rev)
  local src = {B = B}
  function src.peek()
    local m, s = at(r)
    if m then return s, m end
    return nil
  end
  function src.pop() r = r + 1 end
  return src
end
-- due is the members of sord (in claim order) from rank r on whose time
-- has come: ready jobs not yet moved to the ready set. They lead each
-- priority, so the source jumps to the next priority at the first one
-- not due.
local function due(B, Z, r, now)
  local at = reader(Z, false)
  local src = {B = B}
  function src.peek()
    while true do
      local m, s = at(r)
      if not m then return nil end
      if avof(m) <= now then return s, m end
      r = redis.call('ZCOUNT', Z, '-inf', int(s))
    end
  end
  function src.pop() r = r + 1 end
  return src
end
-- later is the members of sord from rank r on whose time is still to
-- come: the scheduled jobs. It skips the due ones that lead a priority.
local function later(B, Z, r, now)
  local at = reader(Z, false)
  local src = {B = B}
  local edge = string.format('%016d', now + OFF) .. '~'
  function src.peek()
    while true do
      local m, s = at(r)
      if not m then return nil end
      if avof(m) > now then return s, m end
      r = seek_asc(Z, s, edge)
    end
  end
  function src.pop() r = r + 1 end
  return src
end
-- listed is the jobs of the run set whose lease expiry is within lo and
-- hi (at most cap of them), sorted in claim order, from after the
-- cursor (cs, cm) when hasc.
local function listed(B, lo, hi, cap, hasc, cs, cm)
  local items = {}
  for _, id in ipairs(redis.call('ZRANGEBYSCORE', B..':run', lo, hi, 'LIMIT', 0, cap)) do
    local v = redis.call('HMGET', B..':j:'..id, 'pr', 'av', 'sq')
    if v[1] then
      local s, m = -tonumber(v[1]), rmember(tonumber(v[2]), tonumber(v[3]), id)
      if not hasc or before(cs, cm, s, m) then items[#items+1] = {s, m} end
    end
  end
  table.sort(items, function(a, b) return before(a[1], a[2], b[1], b[2]) end)
  local i = 1
  local src = {B = B}
  function src.peek()
    local it = items[i]
    if it then return it[1], it[2] end
    return nil
  end
  function src.pop() i = i + 1 end
  return src
end
`

// listScript examines the jobs of one state of the queues KEYS (their
// bases) in list order, merged, after a cursor, and returns those that
// match a filter. ARGV = kind ("ready", "sched", "run", "grouped",
// "sequenced" or "fin"), the finish-ordered set's suffix (kind "fin"), "1" when there is
// a cursor,
// its score and member, the name, the tag and the payload substring to
// match ("" for any), the most matches to return, the most jobs to
// examine, the most running jobs to read per queue, the most expired
// leases to read per queue, and "1" to return every job examined (on a
// Cluster, where the client merges the queues' answers).
//
// It returns {examined, ended (1 when no job is left after the last
// examined), the last examined key's score and member ("" when none),
// now (ms), matches} where each match is {its ordinal among the examined,
// score, member, the job's JF fields then st and dd}. A ready job is one
// in the ready set, a scheduled one whose time has come, or a leased one
// whose lease expired (not yet moved back by a reservation); a scheduled
// one is in sord with its time to come; a running one is in the run set
// with its lease live. With every job examined asked for, a job that does
// not match comes as {ordinal, score, member, 0}.
var listScript = redis.NewScript(prelude + listPrelude + `
local now = now_ms()
local kind, fin = ARGV[1], ARGV[2]
local hasc, cs, cm = ARGV[3] == '1', tonumber(ARGV[4]), ARGV[5]
local fname, ftag, fsearch = ARGV[6], ARGV[7], ARGV[8]
local want, budget = tonumber(ARGV[9]), tonumber(ARGV[10])
local runcap, expcap = tonumber(ARGV[11]), tonumber(ARGV[12])
local every = ARGV[13] == '1'
desc = kind == 'fin'
local srcs = {}
for _, B in ipairs(KEYS) do
  if kind == 'ready' then
    local R, S = B..':ready', B..':sord'
    local r1, r2 = 0, 0
    if hasc then r1, r2 = seek_asc(R, cs, cm), seek_asc(S, cs, cm) end
    srcs[#srcs+1] = ranked(B, R, false, r1)
    srcs[#srcs+1] = due(B, S, r2, now)
    srcs[#srcs+1] = listed(B, '-inf', int(now), expcap, hasc, cs, cm)
  elseif kind == 'sched' then
    local S = B..':sord'
    local r = 0
    if hasc then r = seek_asc(S, cs, cm) end
    srcs[#srcs+1] = later(B, S, r, now)
  elseif kind == 'grouped' or kind == 'sequenced' then
    local Z = B..':grp'
    if kind == 'sequenced' then Z = B..':sqw' end
    local r = 0
    if hasc then r = seek_asc(Z, cs, cm) end
    srcs[#srcs+1] = ranked(B, Z, false, r)
  elseif kind == 'run' then
    srcs[#srcs+1] = listed(B, '(' .. int(now), '+inf', runcap, hasc, cs, cm)
  else
    local Z = B..fin
    local r = 0
    if hasc then r = seek_desc(Z, cs, cm) end
    srcs[#srcs+1] = ranked(B, Z, true, r)
  end
end
-- The sources with a job left, in a binary heap by their next key, so
-- that a merge of many queues costs a few comparisons per job examined.
local heap = {}
local function hbefore(i, j) return before(heap[i].s, heap[i].m, heap[j].s, heap[j].m) end
local function down(i)
  while true do
    local l, r, least = 2 * i, 2 * i + 1, i
    if l <= #heap and hbefore(l, least) then least = l end
    if r <= #heap and hbefore(r, least) then least = r end
    if least == i then return end
    heap[i], heap[least] = heap[least], heap[i]
    i = least
  end
end
for _, src in ipairs(srcs) do
  src.s, src.m = src.peek()
  if src.s then
    heap[#heap+1] = src
    local i = #heap
    while i > 1 and hbefore(i, math.floor(i / 2)) do
      heap[i], heap[math.floor(i / 2)] = heap[math.floor(i / 2)], heap[i]
      i = math.floor(i / 2)
    end
  end
end
local filtered = fname ~= '' or ftag ~= '' or fsearch ~= ''
local out, examined, ended = {}, 0, 0
local ls, lm = '', ''
while #out < want and examined < budget do
  local best = heap[1]
  if not best then
    ended = 1
    break
  end
  local bs, bm = best.s, best.m
  best.pop()
  best.s, best.m = best.peek()
  if not best.s then
    heap[1] = heap[#heap]
    heap[#heap] = nil
  end
  if heap[1] then down(1) end
  examined = examined + 1
  ls, lm = int(bs), bm
  local id = bm
  if not desc then id = string.sub(bm, 33) end
  local jk = best.B..':j:'..id
  local ok = true
  if filtered then
    local v = redis.call('HMGET', jk, 'n', 'tg', 'p')
    ok = v[1] ~= false
    if ok and fname ~= '' then ok = v[1] == fname end
    if ok and ftag ~= '' then
      ok = false
      if v[2] then
        local good, tags = pcall(cjson.decode, v[2])
        if good and type(tags) == 'table' then
          for _, t in ipairs(tags) do
            if t == ftag then ok = true end
          end
        end
      end
    end
    if ok and fsearch ~= '' then ok = v[3] and string.find(v[3], fsearch, 1, true) ~= nil end
  end
  local row
  if ok then
    row = redis.call('HMGET', jk, unpack(JFX))
    if not row[1] then row = nil end
  end
  if row then
    out[#out+1] = {examined, ls, bm, row}
  elseif every then
    out[#out+1] = {examined, ls, bm, 0}
  end
end
if ended == 0 then
  -- Stopped at want or budget: say whether any job is left after the
  -- last one examined.
  if not heap[1] then ended = 1 end
end
return {examined, ended, ls, lm, int(now), out}
`)

// getJobScript reads one job: KEYS = ids; ARGV = id. It returns {now}
// when no job has that ID, else {now, the job's JF fields then st and dd,
// its actions (field ac, a JSON array; "" when none)}.
var getJobScript = redis.NewScript(prelude + listPrelude + `
local now = now_ms()
local B = redis.call('HGET', KEYS[1], ARGV[1])
if not B then return {int(now)} end
local jk = B..':j:'..ARGV[1]
local row = redis.call('HMGET', jk, unpack(JFX))
if not row[1] then return {int(now)} end
return {int(now), row, redis.call('HGET', jk, 'ac') or ''}
`)

// countsScript reads the sizes of the state sets of the queues KEYS
// (their bases) at one instant: per queue {ready, scheduled, running,
// scheduled with their time to come, running with their lease live,
// dead, grouped, sequenced}.
var countsScript = redis.NewScript(prelude + `
local now = int(now_ms())
local out = {}
for i, B in ipairs(KEYS) do
  out[i] = {
    redis.call('ZCARD', B..':ready'), redis.call('ZCARD', B..':sched'), redis.call('ZCARD', B..':run'),
    redis.call('ZCOUNT', B..':sched', '(' .. now, '+inf'), redis.call('ZCOUNT', B..':run', '(' .. now, '+inf'),
    redis.call('ZCARD', B..':dead'), redis.call('ZCARD', B..':grp'), redis.call('ZCARD', B..':sqw'),
  }
end
return out
`)

// oldestScript finds, for each queue KEYS (their bases), the earliest
// available-at of its ready jobs: the first job of each priority in the
// ready set (at most 1,000 priorities), the earliest due scheduled job,
// and the jobs whose lease expired (at most ARGV[1] of them). It returns
// the time in ms per queue, or "" for a queue with no ready job.
var oldestScript = redis.NewScript(prelude + `
local now = now_ms()
local cap = tonumber(ARGV[1])
local out = {}
for i, B in ipairs(KEYS) do
  local best
  local function seen(av) if av and (not best or av < best) then best = av end end
  local R = B..':ready'
  local r = 0
  for _ = 1, 1000 do
    local e = redis.call('ZRANGE', R, r, r, 'WITHSCORES')
    if not e[1] then break end
    seen(tonumber(string.sub(e[1], 1, 16)) - OFF)
    r = redis.call('ZCOUNT', R, '-inf', e[2])
  end
  local d = redis.call('ZRANGEBYSCORE', B..':sched', '-inf', int(now), 'WITHSCORES', 'LIMIT', 0, 1)
  if d[2] then seen(tonumber(d[2])) end
  for _, id in ipairs(redis.call('ZRANGEBYSCORE', B..':run', '-inf', int(now), 'LIMIT', 0, cap)) do
    seen(tonumber(redis.call('HGET', B..':j:'..id, 'av')))
  end
  out[i] = best and int(best) or ''
end
return out
`)

// heartbeatScript records a heartbeat: KEYS = workers, seen; ARGV = id,
// record, ttl ms. It drops up to 100 entries not seen within ttl.
var heartbeatScript = redis.NewScript(prelude + `
local now = now_ms()
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('ZADD', KEYS[2], int(now), ARGV[1])
local old = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', '(' .. int(now - tonumber(ARGV[3])), 'LIMIT', 0, 100)
if #old > 0 then
  redis.call('HDEL', KEYS[1], unpack(old))
  redis.call('ZREM', KEYS[2], unpack(old))
end
return 1
`)

// workersScript lists the entries seen within a ttl: KEYS = workers,
// seen; ARGV = ttl ms, the most to list. It returns id, last seen (ms)
// and record for each.
var workersScript = redis.NewScript(prelude + `
local now = now_ms()
local ids = redis.call('ZRANGEBYSCORE', KEYS[2], int(now - tonumber(ARGV[1])), '+inf', 'WITHSCORES', 'LIMIT', 0, tonumber(ARGV[2]))
local out = {}
for k = 1, #ids, 2 do
  local rec = redis.call('HGET', KEYS[1], ids[k])
  if rec then
    out[#out+1] = ids[k]
    out[#out+1] = int(tonumber(ids[k+1]))
    out[#out+1] = rec
  end
end
return out
`)

// flushMetricsScript adds buffered run metrics to the metrics hashes:
// KEYS = queues, then the hashes; ARGV = "1" to add each queue to the
// queues set KEYS[1] ("0" on a Cluster, where KEYS[1] is only a key of
// the queue's slot), then per point (34 values): the hash's index in
// KEYS, the queue, the field prefix (minute within the hour or hour
// within the day), the field suffix ("" or "." and the job name),
// processed, failed, total runtime, max runtime, total wait, the 24
// runtime buckets, and when the hash expires (ms).
var flushMetricsScript = redis.NewScript(prelude + `
local fs = {'p', 'f', 'rt', '', 'wt'}
for b = 0, 23 do fs[#fs + 1] = 'b' .. b end
local stride = 5 + #fs
for k = 0, (#ARGV - 1) / stride - 1 do
  local a = 1 + k * stride
  local H, pre, suf = KEYS[tonumber(ARGV[a+1])], ARGV[a+3], ARGV[a+4]
  if ARGV[1] == '1' then redis.call('SADD', KEYS[1], ARGV[a+2]) end
  for i, f in ipairs(fs) do
    local n = tonumber(ARGV[a+4+i])
    if f ~= '' and n ~= 0 then redis.call('HINCRBY', H, pre..f..suf, n) end
  end
  local rm = tonumber(ARGV[a+8])
  if rm > tonumber(redis.call('HGET', H, pre..'rm'..suf) or '0') then redis.call('HSET', H, pre..'rm'..suf, int(rm)) end
  redis.call('PEXPIREAT', H, ARGV[a+stride])
end
return 1
`)
