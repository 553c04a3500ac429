package redisqueue

import "github.com/redis/go-redis/v9"

// The scripts of graphs (graph.go). A graph's keys share the hash tag
// {prefix:%G:<id>} (its graph base; "%G" never appears in a queue's
// escaped name), and its nodes' jobs sit in their queues' slots: a node's
// outcome crosses slots as a batch member's does, through the queue's
// outbox <base>:bout (scripts_batch.go), in steps, each one script within
// one slot and each safe to run again (docs/drivers.md, "Graphs across
// slots"):
//
//  1. the node's outcome (Complete, Cancel, Purge, a graph's cancel) and
//     an event naming it, in the node queue's outbox, in one script of
//     the queue's slot;
//  2. the event applied to the graph by driver.NodeTransition's rule:
//     the node and the counters move, each dependant whose dependencies
//     are now satisfied becomes pending and is put on the graph's push
//     list <graph base>:rd as "<generation>:<name>", and the dependants
//     to cancel go on the cascade list :cq, of which a bounded number
//     is cancelled per script; an event applied twice moves nothing;
//  3. each entry of the push list pushed into its node's queue under a
//     guard, graph:generation:name, in that queue's <base>:once, so that
//     a second push of the same entry stores nothing, then the entry
//     taken off the list;
//  4. the event deleted from the outbox, once the graph has nothing left
//     to do for it.
//
// PushGraph, RetryGraph and CancelGraph, which move nodes without an
// outcome, first note a "follow" event (outcome "f") in a node queue's
// outbox, so that a process killed before step 3 leaves an event that
// the next reservation from that queue follows.

// graphPrelude is the helpers of the queue-side scripts that note a
// graph node's outcome: the end of batchPrelude.
const graphPrelude = `
-- graph_of returns the graph a job's meta names, or nil.
local function graph_of(jk)
  local md = redis.call('HGET', jk, 'md')
  if md and string.find(md, '"meridian.graph"', 1, true) then
    local ok, m = pcall(cjson.decode, md)
    if ok and type(m) == 'table' and type(m['meridian.graph']) == 'string' and m['meridian.graph'] ~= '' then
      return m['meridian.graph']
    end
  end
  return nil
end
-- note_node records, in queue B's outbox, that the node of graph gid
-- whose job is id ended with outcome oc (0 done, 2 failed, 3
-- cancelled), or "f" for an event that only asks for the graph to be
-- followed; keep is how long (ms) its result, kept without expiry, is
-- kept once the graph has finished ("" for none).
local function note_node(B, gid, id, oc, keep)
  local n = redis.call('INCR', B..':seq')
  redis.call('HSET', B..':bout', int(n), pack('\0graph', gid, id, tostring(oc), keep))
  return n
end
`

// graphSide is the helpers of the scripts on a graph's slot. The record,
// KEYS[1], is a hash: id, nm (name), cr, ca, fa (created, cancelled,
// finished at, ms), bld (1 while PushGraph writes the nodes), tot, wai,
// pen, don, fai, can (nodes, and those in each state). Per node, by name:
// :st its state (w, p, d, f, c), :wt its dependencies not yet
// satisfied, :jid its job's ID (and :ix the reverse), :q its job's
// queue, :af 1 for AllowFailed, :aft and :dp its dependencies and
// dependants joined by NUL, :jb its job (driver.EncodeNodeJob), :pu how
// many times it was made pending (the push generation), :rk the ms its
// result is kept after the graph finishes. :ord lists the names in
// dispatch order; :rd is the push list, :rl the results to release
// ("<keep>:<name>"), :cq the cascade list.
const graphSide = `
local GS = {w = 'wai', p = 'pen', d = 'don', f = 'fai', c = 'can'}
local GK = {'', ':st', ':wt', ':jid', ':ix', ':q', ':af', ':aft', ':dp', ':jb', ':pu', ':rk', ':rd', ':rl', ':cq', ':ord'}
local function gsplit(s)
  local out = {}
  if s and s ~= '' then
    for x in string.gmatch(s, '[^%z]+') do out[#out+1] = x end
  end
  return out
end
-- ghash reads a hash into a table.
local function ghash(k)
  local t, a = {}, redis.call('HGETALL', k)
  for i = 1, #a, 2 do t[a[i]] = a[i+1] end
  return t
end
local function gmove(GB, n, from, to)
  redis.call('HSET', GB..':st', n, to)
  redis.call('HINCRBY', GB, GS[from], -1)
  redis.call('HINCRBY', GB, GS[to], 1)
end
-- gready makes the waiting node n pending and puts it on the push list.
local function gready(GB, n)
  gmove(GB, n, 'w', 'p')
  local gen = redis.call('HINCRBY', GB..':pu', n, 1)
  redis.call('RPUSH', GB..':rd', gen .. ':' .. n)
end
-- gsatisfy counts one dependency of n as satisfied, if n waits.
local function gsatisfy(GB, n)
  if redis.call('HGET', GB..':st', n) ~= 'w' then return end
  if redis.call('HINCRBY', GB..':wt', n, -1) <= 0 then gready(GB, n) end
end
local function gexpire(GB, ms)
  for _, s in ipairs(GK) do redis.call('PEXPIRE', GB..s, ms) end
end
local function gpersist(GB)
  for _, s in ipairs(GK) do redis.call('PERSIST', GB..s) end
end
-- gend records that the graph finished, if it just did: its kept
-- results go on the release list and its keys expire after keep ms.
local function gend(GB, keep)
  if redis.call('LLEN', GB..':cq') > 0 then return end
  local v = redis.call('HMGET', GB, 'wai', 'pen', 'fa', 'tot')
  if (tonumber(v[4]) or 0) == 0 or (tonumber(v[1]) or 0) + (tonumber(v[2]) or 0) > 0 or v[3] then return end
  redis.call('HSET', GB, 'fa', int(now_ms()))
  local rk = redis.call('HGETALL', GB..':rk')
  for k = 1, #rk, 2 do redis.call('RPUSH', GB..':rl', rk[k+1] .. ':' .. rk[k]) end
  gexpire(GB, keep)
end
-- gdrain cancels up to lim nodes of the cascade list that wait, putting
-- their dependants on it, then ends the graph if it finished.
local function gdrain(GB, lim, keep)
  for _ = 1, lim do
    local n = redis.call('LPOP', GB..':cq')
    if not n then break end
    if redis.call('HGET', GB..':st', n) == 'w' then
      gmove(GB, n, 'w', 'c')
      for _, d in ipairs(gsplit(redis.call('HGET', GB..':dp', n))) do redis.call('RPUSH', GB..':cq', d) end
    end
  end
  gend(GB, keep)
end
`

// createGraphScript writes one chunk of a graph's nodes: KEYS = graph
// base; ARGV = "1" for the first chunk (which creates the record, marked
// building) or "0", the building keys' expiry ms, id, name, then per node
// its name, job ID, queue, AllowFailed ("1" or "0"), dependencies and
// dependants (NUL-joined), job, dependencies count, "1" for a root
// (pending, on the push list). It returns 0, changing nothing, when the
// first chunk finds the graph there or a later one finds it not
// building, and otherwise 1.
var createGraphScript = redis.NewScript(prelude + graphSide + `
local GB = KEYS[1]
if ARGV[1] == '1' then
  if redis.call('EXISTS', GB) == 1 then return 0 end
  redis.call('HSET', GB, 'id', ARGV[3], 'nm', ARGV[4], 'cr', int(now_ms()), 'bld', 1,
    'tot', 0, 'wai', 0, 'pen', 0, 'don', 0, 'fai', 0, 'can', 0)
elseif redis.call('HGET', GB, 'bld') ~= '1' then
  return 0
end
for k = 5, #ARGV, 9 do
  local n = ARGV[k]
  redis.call('RPUSH', GB..':ord', n)
  redis.call('HSET', GB..':jid', n, ARGV[k+1])
  redis.call('HSET', GB..':ix', ARGV[k+1], n)
  redis.call('HSET', GB..':q', n, ARGV[k+2])
  if ARGV[k+3] == '1' then redis.call('HSET', GB..':af', n, 1) end
  if ARGV[k+4] ~= '' then redis.call('HSET', GB..':aft', n, ARGV[k+4]) end
  if ARGV[k+5] ~= '' then redis.call('HSET', GB..':dp', n, ARGV[k+5]) end
  redis.call('HSET', GB..':jb', n, ARGV[k+6])
  redis.call('HSET', GB..':wt', n, ARGV[k+7])
  if ARGV[k+8] == '1' then
    redis.call('HSET', GB..':st', n, 'p')
    redis.call('HSET', GB..':pu', n, 1)
    redis.call('RPUSH', GB..':rd', '1:' .. n)
  else
    redis.call('HSET', GB..':st', n, 'w')
  end
end
gexpire(GB, tonumber(ARGV[2]))
return 1
`)

// liveGraphScript ends a graph's building: KEYS = graph base; ARGV =
// nodes, roots. It returns 0 when the graph is not building.
var liveGraphScript = redis.NewScript(prelude + graphSide + `
local GB = KEYS[1]
if redis.call('HGET', GB, 'bld') ~= '1' then return 0 end
local tot, roots = tonumber(ARGV[1]), tonumber(ARGV[2])
redis.call('HDEL', GB, 'bld')
redis.call('HSET', GB, 'tot', tot, 'wai', tot - roots, 'pen', roots)
gpersist(GB)
return 1
`)

// indexGraphScript lists a graph for ListGraphs: KEYS = {prefix}:graphs,
// {prefix}:gseq; ARGV = id.
var indexGraphScript = indexBatchScript

// applyGraphScript applies node outcomes to their graph (step 2): KEYS =
// graph base; ARGV = retention ms, cascade limit, then (job ID, outcome,
// keep) triples. It returns {0} for an unknown graph, {2} for one still
// building (its events wait), and otherwise 1 followed by the places
// (from 1) of the events whose kept result is to be released now: the
// node was not pending, so no graph waits for it.
var applyGraphScript = redis.NewScript(prelude + graphSide + `
local GB = KEYS[1]
local v = redis.call('HMGET', GB, 'id', 'bld')
if not v[1] then return {0} end
if v[2] then return {2} end
local keep = tonumber(ARGV[1])
local out = {1}
local e = 0
for k = 3, #ARGV, 3 do
  e = e + 1
  local id, oc, rk = ARGV[k], ARGV[k+1], ARGV[k+2]
  local n = redis.call('HGET', GB..':ix', id)
  if n and oc ~= 'f' then
    local from = redis.call('HGET', GB..':st', n)
    local to
    if oc == '0' and (from == 'p' or from == 'f') then to = 'd'
    elseif oc == '2' and from == 'p' then to = 'f'
    elseif oc == '3' and from == 'p' then to = 'c' end
    if to then
      gmove(GB, n, from, to)
      if from == 'p' then
        if to == 'd' and rk ~= '' then redis.call('HSET', GB..':rk', n, rk) end
        for _, d in ipairs(gsplit(redis.call('HGET', GB..':dp', n))) do
          if to == 'd' or (to == 'f' and redis.call('HEXISTS', GB..':af', d) == 1) then
            gsatisfy(GB, d)
          else
            redis.call('RPUSH', GB..':cq', d)
          end
        end
      end
    end
  end
  if rk ~= '' and not (n and redis.call('HEXISTS', GB..':rk', n) == 1) then out[#out+1] = e end
end
gdrain(GB, tonumber(ARGV[2]), keep)
return out
`)

// graphDueScript reads what a graph has to do (step 3): KEYS = graph
// base; ARGV = limit. It returns {0} for an unknown or building graph,
// and otherwise {1, cancelled at ("" if not), pending nodes, cascade
// length, push entries, releases}: up to limit push entries (entry, job
// ID, queue, job) and up to limit releases (entry, job ID, queue).
var graphDueScript = redis.NewScript(`
local GB = KEYS[1]
local v = redis.call('HMGET', GB, 'id', 'bld', 'ca', 'pen')
if not v[1] or v[2] then return {0} end
local lim = tonumber(ARGV[1])
local function name(e) return string.sub(e, string.find(e, ':', 1, true) + 1) end
local rd, rl = {}, {}
for _, e in ipairs(redis.call('LRANGE', GB..':rd', 0, lim - 1)) do
  local n = name(e)
  rd[#rd+1] = e
  rd[#rd+1] = redis.call('HGET', GB..':jid', n) or ''
  rd[#rd+1] = redis.call('HGET', GB..':q', n) or ''
  rd[#rd+1] = redis.call('HGET', GB..':jb', n) or ''
end
for _, e in ipairs(redis.call('LRANGE', GB..':rl', 0, lim - 1)) do
  local n = name(e)
  rl[#rl+1] = e
  rl[#rl+1] = redis.call('HGET', GB..':jid', n) or ''
  rl[#rl+1] = redis.call('HGET', GB..':q', n) or ''
end
return {1, v[3] or '', tonumber(v[4]) or 0, redis.call('LLEN', GB..':cq'), rd, rl}
`)

// cancelGraphScript marks a graph cancelled unless it has finished, and
// cancels its waiting nodes (its pending ones are cancelled in their
// queues, step 1): KEYS = graph base; ARGV = retention ms. It returns 0
// for an unknown graph, 1 otherwise.
var cancelGraphScript = redis.NewScript(prelude + graphSide + `
local GB = KEYS[1]
local v = redis.call('HMGET', GB, 'id', 'bld', 'fa', 'ca')
if not v[1] or v[2] then return 0 end
if v[3] or v[4] then return 1 end
redis.call('HSET', GB, 'ca', int(now_ms()))
local st = redis.call('HGETALL', GB..':st')
local n = 0
for k = 1, #st, 2 do
  if st[k+1] == 'w' then
    redis.call('HSET', GB..':st', st[k], 'c')
    n = n + 1
  end
end
redis.call('HINCRBY', GB, 'wai', -n)
redis.call('HINCRBY', GB, 'can', n)
redis.call('DEL', GB..':cq')
gend(GB, tonumber(ARGV[1]))
return 1
`)

// pendingNodesScript reads a graph's pending nodes: KEYS = graph base.
// It returns (job ID, queue, guard entry) triples, the entry being the
// push list's "<generation>:<name>" of the node's last push.
var pendingNodesScript = redis.NewScript(`
local GB = KEYS[1]
local out = {}
local st = redis.call('HGETALL', GB..':st')
for k = 1, #st, 2 do
  if st[k+1] == 'p' then
    local n = st[k]
    out[#out+1] = redis.call('HGET', GB..':jid', n) or ''
    out[#out+1] = redis.call('HGET', GB..':q', n) or ''
    out[#out+1] = (redis.call('HGET', GB..':pu', n) or '0') .. ':' .. n
  end
end
return out
`)

// retryGraphScript runs a graph's failed nodes again (see
// driver.Graphs): KEYS = graph base; ARGV = retention ms, cascade limit.
// Each failed node becomes pending and goes on the push list (step 3
// retries its dead letter, or pushes its job anew); each cancelled node
// never made pending waits again for its dependencies as they stand;
// the dependants of the nodes still cancelled are cancelled. It returns
// {-1} for an unknown graph, and otherwise the count of failed nodes
// retried followed by (job ID, queue) of the done nodes, whose results
// are kept again until the graph finishes.
var retryGraphScript = redis.NewScript(prelude + graphSide + `
local GB = KEYS[1]
local v = redis.call('HMGET', GB, 'id', 'bld')
if not v[1] or v[2] then return {-1} end
redis.call('HDEL', GB, 'ca', 'fa')
gpersist(GB)
redis.call('DEL', GB..':rl')
-- The nodes' hashes are read once into tables, and the counters moved
-- once at the end: a graph of driver.MaxGraphNodes in one script.
local ord = redis.call('LRANGE', GB..':ord', 0, -1)
local st, pu, wt = ghash(GB..':st'), ghash(GB..':pu'), ghash(GB..':wt')
local delta = {w = 0, p = 0, d = 0, f = 0, c = 0}
local function set(n, to)
  delta[st[n]] = delta[st[n]] - 1
  delta[to] = delta[to] + 1
  st[n] = to
  redis.call('HSET', GB..':st', n, to)
end
local function ready(n)
  set(n, 'p')
  local gen = (tonumber(pu[n]) or 0) + 1
  pu[n] = gen
  redis.call('HSET', GB..':pu', n, gen)
  redis.call('RPUSH', GB..':rd', gen .. ':' .. n)
end
local out = {0}
local done = false
for _, n in ipairs(ord) do
  if st[n] == 'f' then
    ready(n)
    out[1] = out[1] + 1
  elseif st[n] == 'd' then
    done = true
  end
end
if done then
  local jid, q = ghash(GB..':jid'), ghash(GB..':q')
  for _, n in ipairs(ord) do
    if st[n] == 'd' then
      out[#out+1] = jid[n] or ''
      out[#out+1] = q[n] or ''
    end
  end
end
local aft = ghash(GB..':aft')
for _, n in ipairs(ord) do
  if st[n] == 'c' and not pu[n] then
    set(n, 'w')
    local c = 0
    for _, d in ipairs(gsplit(aft[n])) do
      if st[d] ~= 'd' then c = c + 1 end
    end
    wt[n] = c
    redis.call('HSET', GB..':wt', n, c)
  end
end
local dp = ghash(GB..':dp')
for _, n in ipairs(ord) do
  if st[n] == 'w' and tonumber(wt[n]) == 0 then
    ready(n)
  elseif st[n] == 'c' then
    for _, d in ipairs(gsplit(dp[n])) do
      if st[d] == 'w' then redis.call('RPUSH', GB..':cq', d) end
    end
  end
end
for k, d in pairs(delta) do
  if d ~= 0 then redis.call('HINCRBY', GB, GS[k], d) end
end
gdrain(GB, tonumber(ARGV[2]), tonumber(ARGV[1]))
return out
`)

// noteGraphScript notes a follow event of a graph in a queue's outbox:
// KEYS = the queue's base; ARGV = graph ID. It returns the event's field.
var noteGraphScript = redis.NewScript(prelude + batchPrelude + `
return note_node(KEYS[1], ARGV[1], '', 'f', '')
`)

// pushNodesScript pushes pending nodes' jobs of one queue once each
// (step 3): KEYS = ids, queues, the queue's base; ARGV = channel, the
// guards' retention ms, then per job its guard and its pushFields. A dead
// letter of the job's ID (a failed node retried) goes back to ready with
// its attempts reset; otherwise the job is pushed (an active job of its
// ID is left alone). The guard in <base>:once makes a second run store
// nothing. It returns how many it acted on, and publishes the queue when
// a job became ready (or a sequence's next member did, a push ending a
// dead head).
var pushNodesScript = redis.NewScript(prelude + batchPrelude + controlLua + `
local ids, qset, B = KEYS[1], KEYS[2], KEYS[3]
local now = now_ms()
redis.call('ZREMRANGEBYSCORE', B..':once', '-inf', int(now - tonumber(ARGV[2])))
local n, woke = 0, {}
for i = 3, #ARGV, ` + itoa(1+pushFields) + ` do
  if not redis.call('ZSCORE', B..':once', ARGV[i]) then
    redis.call('ZADD', B..':once', int(now), ARGV[i])
    n = n + 1
    local id = ARGV[i+1]
    if redis.call('HGET', ids, id) == B and redis.call('HGET', B..':j:'..id, 'st') == 'd' then
      if retry_dead(ids, id, now) == 1 then woke[ARGV[i+2]] = true end
    else
      local _, _, ready = push_one(ids, qset, now, i + 1)
      if ready then woke[ARGV[i+2]] = true end
    end
  end
end
publish(ARGV[1], woke)
return n
`)

// cancelNodesScript cancels pending nodes of a cancelled graph in one
// queue (step 1 of their cancel): KEYS = ids, base, the cancel log; ARGV
// = graph ID, stamp (ms), the cancel log's keep (ms) and cap, the guards'
// retention (ms), the wake-up channel, then (job ID, guard) pairs. An active job is cancelled
// as Controller.Cancel does (noted in the outbox); a job not there whose
// push guard is not in <base>:once (its push has not happened) has the
// guard taken, so that the push never happens, and is noted cancelled; a
// dead or finished one is left to its own event. It returns how many it
// noted, and publishes the queues where a cancel made a sequence's next
// member ready.
var cancelNodesScript = redis.NewScript(prelude + batchPrelude + controlLua + `
local ids, B, clog, gid = KEYS[1], KEYS[2], KEYS[3], ARGV[1]
local now = now_ms()
local stamp = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', B..':once', '-inf', int(now - tonumber(ARGV[5])))
local n = 0
for k = 7, #ARGV, 2 do
  local id, guard = ARGV[k], ARGV[k+1]
  local code = cancel_one(ids, clog, id, now, stamp)
  if code == 1 then
    n = n + 1
  elseif code == 0 and not redis.call('ZSCORE', B..':once', guard) then
    redis.call('ZADD', B..':once', int(now), guard)
    note_node(B, gid, id, 3, '')
    n = n + 1
  end
end
trim_log(clog, stamp, tonumber(ARGV[3]), tonumber(ARGV[4]))
publish(ARGV[6], {})
return n
`)
