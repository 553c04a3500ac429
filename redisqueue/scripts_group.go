package redisqueue

import "github.com/redis/go-redis/v9"

// The scripts of group aggregation (group.go). A member is stored by
// push_one (scripts.go) in state 'g': in its group's set
// <base>:gm:<len(name)>:<name>:<key> (member IDs by insertion sequence,
// so oldest first), in <base>:grp (the queue's members in claim order,
// which Len, Counts and the lists read) and in the three indexes of its
// name, <base>:gl:<name>, <base>:gf:<name> and <base>:gn:<name> (each
// group key by its newest member's creation, its oldest member's
// creation and its size), which regroup keeps true in every script that
// adds or takes a member. All of them are keys of the queue's slot.

// groupsDueScript reads the due groups of one name in one queue: KEYS =
// base; ARGV = name, grace ms, max delay ms (0: none), max size, the most
// members to return. A group is due when its newest member is at least
// grace old, its oldest at least max delay old, or it holds max size
// members (driver.GroupRule.Due, by the server's clock); the indexes find
// those without reading the others. It returns {more (1 when it stopped at
// the most members), sets...}, each set {group key, then the JF fields of
// up to max size members, oldest first}: a due group gives sets while
// what is left of it is due, as a gather would take them.
var groupsDueScript = redis.NewScript(prelude + `
local B = KEYS[1]
local now = now_ms()
local name = ARGV[1]
local grace, maxd, maxs, cap = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local keys, seen = {}, {}
local function add(list)
  for _, k in ipairs(list) do
    if not seen[k] then
      seen[k] = true
      keys[#keys+1] = k
    end
  end
end
add(redis.call('ZRANGEBYSCORE', B..':gl:'..name, '-inf', int(now - grace), 'LIMIT', 0, cap))
if maxd > 0 then add(redis.call('ZRANGEBYSCORE', B..':gf:'..name, '-inf', int(now - maxd), 'LIMIT', 0, cap)) end
add(redis.call('ZRANGEBYSCORE', B..':gn:'..name, maxs, '+inf', 'LIMIT', 0, cap))
local out, total, more = {0}, 0, 0
local function cr(id) return tonumber(redis.call('HGET', B..':j:'..id, 'cr')) or 0 end
for _, gk in ipairs(keys) do
  if total >= cap then
    more = 1
    break
  end
  local G = gkey(B, name, gk)
  local n = redis.call('ZCARD', G)
  local off = 0
  local last = n > 0 and cr(redis.call('ZRANGE', G, -1, -1)[1]) or 0
  while off < n do
    if total >= cap then
      more = 1
      break
    end
    local left = n - off
    local first = cr(redis.call('ZRANGE', G, off, off)[1])
    if not (left >= maxs or last + grace <= now or (maxd > 0 and first + maxd <= now)) then break end
    local k = math.min(left, maxs)
    local set = {gk}
    for _, id in ipairs(redis.call('ZRANGE', G, off, off + k - 1)) do
      set[#set+1] = redis.call('HMGET', B..':j:'..id, unpack(JF))
    end
    out[#out+1] = set
    off = off + k
    total = total + k
  end
end
out[1] = more
return out
`)

// gatherScript stores sets in place of their members, one queue's:
// KEYS = ids, queues (the queue's ID index on a Cluster, see cluster.go),
// base; ARGV = channel, name, number of sets, then per set its group key,
// its member count k, the k member IDs oldest first, and the set's
// pushFields (push_one's, base index 3). A set is stored only when its
// members are still the k oldest of their group; then they are deleted,
// the group's indexes set again and the set pushed, all in this script,
// so a member that another gather took, or that was cancelled meanwhile,
// makes its set be skipped whole: no member reaches two sets. It returns
// how many sets it stored, and publishes the queue's name when it stored
// one ready.
var gatherScript = redis.NewScript(prelude + `
local ids, qset, B = KEYS[1], KEYS[2], KEYS[3]
local now = now_ms()
local name = ARGV[2]
local i = 4
local stored, woke = 0, {}
for _ = 1, tonumber(ARGV[3]) do
  local gk, k = ARGV[i], tonumber(ARGV[i+1])
  local first, pi = i + 2, i + 2 + k
  i = pi + ` + itoa(pushFields) + `
  local G = gkey(B, name, gk)
  local cur = redis.call('ZRANGE', G, 0, k - 1)
  local ok = #cur == k and not redis.call('HGET', ids, ARGV[pi])
  if ok then
    for m = 1, k do
      if cur[m] ~= ARGV[first + m - 1] then
        ok = false
        break
      end
    end
  end
  if ok then
    for _, id in ipairs(cur) do
      local jk = B..':j:'..id
      local v = redis.call('HMGET', jk, 'av', 'sq')
      redis.call('ZREM', G, id)
      if v[1] then redis.call('ZREM', B..':grp', rmember(tonumber(v[1]), tonumber(v[2]), id)) end
      drop(ids, B, jk, id)
    end
    regroup(B, name, gk)
    local st, _, ready = push_one(ids, qset, now, pi)
    if st == 1 then
      stored = stored + 1
      if ready then woke[ARGV[pi+1]] = true end
    end
  end
end
publish(ARGV[1], woke)
return stored
`)
