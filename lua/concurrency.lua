--[[
concurrency.lua - concurrency limits (leases), atomically, inside Redis
(issue 20).

A policy of algorithm concurrency admits at most max_permits in flight at
once, not per second: an allowed take grants a lease of `permits` that
holds them until it is released or until it expires (lease_ms after its
grant or its last renewal), so a holder that crashed frees its slot on its
own. Exact across any number of permitd instances: at no Redis time are
more than max_permits held by leases that have not expired, and an
expired lease frees its permits at its expiry, to the microsecond of Redis
time (every call reads a lease as held only while now < its expiry).

The call (the contract of every decision script, issue 20; the same as
lua/sliding_window.lua's, whose header spells it out):
  KEYS[i]     item i's state key (letter c), i = 1..m, one slot
  ARGV[1]     "take" (Acquire: a new lease), "peek" (nothing taken or
              written), "all" (takes, all or nothing), "release" (free the
              lease named), "renew" (extend the lease named to now +
              lease_ms)
  ARGV[2]     np; ARGV[3] the request-id record's time-to-live in ms, ""
              in a compact call (no item carries a request_id or a
              lease_id: a peek's; 2 ARGV an item, and a RECORD of its
              first 8 numbers, no lease id)
  ARGV[4+4(j-1) .. 7+4(j-1)]  policy j: version stamp, max_permits,
              lease_ms, ""
  ARGV[b+w(i-1) .. b+w(i-1)+w-1], b = 4 + 4 np, w = 4 (2 compact):
              item i's policy index, permits (>= 1; unused by release and
              renew), then with w = 4 request_id ("" none), lease_id (32
              lowercase hex characters: a take's new lease, drawn by
              permitd from getrandom(); the lease a release or renew acts
              on)
  ARGV[b+wn+(i-m-1)]  item i's key for i = m+1..n (keys of several slots
              of one master: lua/bucket.lua's header), n = (#ARGV - b + 1
              + m) / (w + 1). Every key is read before any is written.

The state: one ZSET per key, simple to read for an inspector:
  member "<lease_id>:<permits>", score its expiry (Redis time, us)
  member "v", score -stamp   the version stamp of the policy it was last
                             written under (negated, so it sorts before
                             every lease: ZRANGEBYSCORE key (now +inf are
                             the leases held now)
Every call reads the whole set (ZRANGE 0 -1 WITHSCORES: the leases held,
at most max_permits of them, and those expired since the last write) and
counts as held only the leases whose expiry is after now. Every call
that may write (all but peek) removes the expired leases, and a key is
set to expire with its last lease (PEXPIRE), or deleted when no lease is
held, so a key that limits nothing holds no memory.

Per mode, for an item naming lease L:
  take/all  L held already (a retried Acquire that carries its lease):
            renewed, as below. Else granted when held + permits <=
            max_permits: the member "L:permits" scored now + lease_ms.
            Denied: nothing written for it; retry_after_ms is the wait
            until enough leases expire for `permits` to fit: the
            earliest expiry among the leases held when one frees enough
            (always so for permits 1), computed from the leases' expiries
            and rounded up to whole ms.
  release   L held: removed, allowed 1. Not held (released already,
            expired, or never granted): a no-op that says so, flags 2,
            allowed 0. Idempotent.
  renew     L held: its expiry set to now + lease_ms, allowed 1. Not
            held: flags 2, allowed 0, nothing changed (an expired lease
            is not revived: its slot may be someone else's now).
  peek      whether a take of `permits` would be granted; nothing written.

The answer: per item one 112-byte RECORD, struct '<dddddddddd' = status,
allowed, remaining, limit, retry_after_ms, reset_after_ms, window_s,
level_micro, lease_expires_ms, flags, then the 32-byte lease id (of an
allowed take, renew or release; else 32 "\0" bytes):
  status     0, -10 aborted ("all"), -11 out_of_range (permits >
             max_permits), -13 internal (a lease id that is not 32
             lowercase hex characters: permitd's bug), -15 data_loss (the
             key is not a ZSET this script wrote; remaining 0, or the
             number of members), -17 stale (written under a newer stamp:
             remaining that stamp, nothing written)
  remaining  max_permits - held after the item (0 when held exceeds a
             lowered max_permits); level_micro remaining * 1e6
  reset_after_ms  until the last lease held expires (0: none held)
  window_s   ceil(lease_ms / 1000), the RateLimit-Policy `w`
  lease_expires_ms  an allowed take or renew: lease_ms (ms until the lease
             expires); else 0
  flags      1 = replayed (request ids as in lua/sliding_window.lua: on
             take and all, the stored RECORD of the first take with that
             request_id, its lease id included, nothing taken again), 2 =
             no-op (release or renew of a lease not held)

Costs per item: one ZRANGE of the held leases (O(held)), and when it
writes: ZREMRANGEBYSCORE of the expired, ZADD or ZREM of the lease,
ZADD of the stamp, PEXPIRE. Memory: one member of about 35 bytes per
lease held; a key holds at most max_permits leases.

Mode "inspect" (the admin inspector: limiter_inspect() in
server/decisions/limiter.c): a peek of one permit for one item, nothing
written, answered as an array of integers: the RECORD's ten numbers, then
0, 0, 0 (the layout's window reset, events and log entries: none here),
j and, for each of the j leases held that expire soonest (j <= 100), the
first 8 hex characters of its id read as a number, its permits and the
ms until it expires. A lease id is a capability (whoever has it may
release the lease), so the whole id never leaves Redis here.
]]

local SCRIPT, P1 = 'concurrency.lua', 'lease_ms'   -- lua/lib/item.lua's errors name them
-- @include call.lua
local find, sub = string.find, string.sub

if mode ~= 'take' and mode ~= 'peek' and mode ~= 'all' and mode ~= 'release' and mode ~= 'renew' then
  return redis.error_reply('concurrency.lua: mode "' .. tostring(mode) ..
                           '" is not one of take, peek, all, release, renew')
end
-- @include keys.lua

-- @include ms_up.lua

local policies = {}
local function policy(j)
  local p = policies[j]
  if not p then
    local at = 4 + 4 * (j - 1)
    local max, lms = tonumber(ARGV[at + 1]), tonumber(ARGV[at + 2])
    if not max or not lms or max < 1 or lms < 1 then
      return nil
    end
    p = {ver = tonumber(ARGV[at]), max = max, lms = lms, ttl = lms * 1000,
         window_s = ceil(lms / 1000)}
    policies[j] = p
  end
  return p
end

-- A copy of a key's leases (id -> {member, permits, exp}): entries are
-- never changed in place, so "all" can go back to the copy taken at read.
local function copy(leases)
  local c = {}
  for id, l in pairs(leases) do
    c[id] = l
  end
  return c
end

-- The Redis time at which `want` permits fit next to the leases held
-- (nobody else taking): the expiry at which enough of them have expired.
local function passes_at(st, want)
  local need = st.held + want - st.p.max
  if need <= 0 then
    return now
  end
  local list = {}
  for _, l in pairs(st.leases) do
    list[#list + 1] = l
  end
  table.sort(list, function(a, b) return a.exp < b.exp end)
  local freed = 0
  for _, l in ipairs(list) do
    freed = freed + l.permits
    if freed >= need then
      return l.exp
    end
  end
  return now   -- unreachable while want <= max_permits
end

local function reset_after(st)
  local last = 0
  for _, l in pairs(st.leases) do
    if l.exp > last then
      last = l.exp
    end
  end
  return ms_up(last - now)
end

local function remaining(st)
  local left = st.p.max - st.held
  if left < 0 then
    return 0
  end
  return left
end

-- Phase 1: every key read (lease sets and request records) before any write.
local states, order = {}, {}
local records = {}
local items = {}
for i = 1, n do
  local at = base + per * (i - 1)
  local it = {j = ARGV[at] == '1' and 1 or tonumber(ARGV[at]),
              want = ARGV[at + 1] == '1' and 1 or tonumber(ARGV[at + 1]),
              rid = per == 4 and ARGV[at + 2] or '', lease = per == 4 and ARGV[at + 3] or '',
              key = keys[i]}
  -- @include item.lua
  local k = it.key
  if not states[k] then
    local st
    local r = redis.pcall('ZRANGE', k, 0, -1, 'WITHSCORES')
    if type(r) == 'table' and r.err then
      if not find(r.err, 'WRONGTYPE', 1, true) then
        return r     -- e.g. a non local key: the call fails, nothing written
      end
      st = {foreign = 0}
    else
      local leases, held, dead, ver = {}, 0, 0, 0
      for x = 1, #r, 2 do
        local member, score = r[x], tonumber(r[x + 1])
        if member == 'v' then
          ver = -score
        else
          local c = find(member, ':', 1, true)
          local permits = c and tonumber(sub(member, c + 1))
          if not permits then
            st = {foreign = #r / 2}
            break
          end
          if score > now then
            leases[sub(member, 1, c - 1)] = {member = member, permits = permits, exp = score}
            held = held + permits
          else
            dead = dead + 1
          end
        end
      end
      if not st then
        st = {p = it.p, ver = ver, leases = leases, held = held, dead = dead,
              orig = copy(leases), orig_held = held, removed = {}, changed = false,
              exists = #r > 0, total = 0}
      end
    end
    states[k] = st
    order[#order + 1] = k
  end
end

local function answer(status, allowed, st, p, retry, expires, flags, lease)
  if not st then
    return pack(RECORD, status, 0, allowed, p.max, 0, 0, 0, 0, 0, 0) .. NO_LEASE
  end
  local left = remaining(st)
  return pack(RECORD, status, allowed, left, p.max, retry, reset_after(st), p.window_s,
              left * 1000000, expires, flags) .. (lease or NO_LEASE)
end

-- Phase 2: the items in order; items of one key see each other's changes.
local out = {}
local refused, errored = false, false
local fresh = {}
local takes = mode == 'take' or mode == 'all'
for i = 1, n do
  local it = items[i]
  local p, st, lease = it.p, states[it.key], it.lease
  local rec = it.rkey and (fresh[it.rkey] or records[it.rkey])
  local valid = #lease == 32 and not find(lease, '[^0-9a-f]')
  if rec then
    -- @include replay.lua
  elseif (takes or mode == 'peek') and it.want > p.max then
    out[i], it.status = answer(OUT_OF_RANGE, 0, nil, p), OUT_OF_RANGE
    refused, errored = true, true
  elseif st.foreign then
    out[i], it.status = answer(DATA_LOSS, st.foreign, nil, p), DATA_LOSS
    refused, errored = true, true
  elseif st.ver > p.ver then
    out[i], it.status = answer(STALE, st.ver, nil, p), STALE
    refused, errored = true, true
  elseif mode ~= 'peek' and not valid then
    out[i], it.status = answer(INTERNAL, 0, nil, p), INTERNAL
    refused, errored = true, true
  else
    it.status = 0
    local held = valid and st.leases[lease]
    if mode == 'peek' then
      local ok = st.held + it.want <= p.max
      out[i] = answer(0, ok and 1 or 0, st, p, ok and 0 or ms_up(passes_at(st, it.want) - now), 0, 0)
    elseif mode == 'release' then
      if held then
        st.leases[lease], st.held, st.changed = nil, st.held - held.permits, true
        st.removed[#st.removed + 1] = held.member
        out[i] = answer(0, 1, st, p, 0, 0, 0, lease)
      else
        out[i] = answer(0, 0, st, p, 0, 0, 2)
      end
    elseif mode == 'renew' or held then
      if held then
        st.leases[lease] = {member = held.member, permits = held.permits, exp = now + p.ttl}
        st.changed = true
        out[i] = answer(0, 1, st, p, 0, p.lms, 0, lease)
      else
        out[i] = answer(0, 0, st, p, 0, 0, 2)
      end
    else
      st.total = st.total + it.want
      if st.held + it.want <= p.max then
        st.leases[lease] = {member = lease .. ':' .. it.want, permits = it.want, exp = now + p.ttl}
        st.held, st.changed = st.held + it.want, true
        out[i] = answer(0, 1, st, p, 0, p.lms, 0, lease)
      else
        out[i] = answer(0, 0, st, p, ms_up(passes_at(st, it.want) - now), 0, 0)
        refused = true
      end
    end
    if it.rkey then
      fresh[it.rkey] = out[i]
    end
  end
end

-- "all" refused: nothing is taken (as lua/sliding_window.lua): every key
-- goes back to what it held, and an item answers the longest wait of the
-- keys for their totals.
if mode == 'all' and refused then
  local never, longest = false, 0
  for _, st in pairs(states) do
    if not st.foreign then
      st.leases, st.held, st.changed = copy(st.orig), st.orig_held, false
    end
  end
  if not errored then
    for _, st in pairs(states) do
      if st.foreign or st.total == 0 then
        -- no item of the call decided on it
      elseif st.total > st.p.max then
        never = true
      else
        local wait = ms_up(passes_at(st, st.total) - now)
        if wait > longest then
          longest = wait
        end
      end
    end
  end
  local function waiting(st, p)     -- built only here: a refused "all"
    return answer(0, 0, st, p, longest, 0, 0)
  end
  -- @include all_refused.lua
end

-- Phase 3: the writes: expired leases removed, each key's changes, its
-- stamp, its expiry with its last lease (no lease: no key); then the
-- answers with a request id.
if mode ~= 'peek' then
  for _, k in ipairs(order) do
    local st = states[k]
    if not st.foreign and st.ver <= st.p.ver and (st.changed or st.dead > 0) then
      local last = 0
      for _, l in pairs(st.leases) do
        if l.exp > last then
          last = l.exp
        end
      end
      if last == 0 then
        redis.call('DEL', k)
      else
        if st.dead > 0 then
          redis.call('ZREMRANGEBYSCORE', k, '(0', string.format('%d', now))
        end
        for _, member in ipairs(st.removed) do
          redis.call('ZREM', k, member)
        end
        for id, l in pairs(st.leases) do
          if st.orig[id] ~= l then
            redis.call('ZADD', k, string.format('%d', l.exp), l.member)
          end
        end
        redis.call('ZADD', k, -st.p.ver, 'v')
        redis.call('PEXPIRE', k, format('%d', ms_up(last - now)))
      end
    end
  end
  -- @include records.lua
end

if inspect then
  -- @include inspect.lua
  local it = items[1]
  local st = states[it.key]
  r[11], r[12], r[13], r[14] = 0, 0, 0, 0
  if not st.foreign and st.ver <= it.p.ver then
    local list = {}
    for id, l in pairs(st.leases) do
      list[#list + 1] = {id = id, permits = l.permits, exp = l.exp}
    end
    table.sort(list, function(a, b) return a.exp < b.exp end)
    for x = 1, #list < 100 and #list or 100 do
      local l = list[x]
      r[#r + 1] = tonumber(sub(l.id, 1, 8), 16) or 0
      r[#r + 1] = l.permits
      r[#r + 1] = ms_up(l.exp - now)
      r[14] = x
    end
  end
  return r
end

return table.concat(out)
