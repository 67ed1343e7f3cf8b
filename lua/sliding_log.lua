--[[
sliding_log.lua - sliding-log decisions, atomically, inside Redis (issue 20).

A policy of algorithm sliding_log keeps an exact record of the permits
taken in the last window_ms: one ZSET entry per permit, scored with the
Redis time of its take. Exact: in every interval [a, a + W) of Redis time
(W = window_ms in us, any a, not only aligned ones), at most max_permits
are admitted, across any number of permitd instances. Proof: let T be the
last take in such an interval; it was allowed only if the entries in
(T - W, T] plus its permits were at most max_permits, and every take in
[a, T] lies in (T - W, T] since a > T - W. The price is memory: up to
max_permits entries per key (permitd caps max_permits at 10000,
POLICY_LOG_MAX_PERMITS).

The call (the contract of every decision script, issue 20; the same as
lua/sliding_window.lua's, whose header spells it out):
  KEYS[i]     item i's state key (letter l), i = 1..m, one slot
  ARGV[1]     "take", "peek" (nothing taken, nothing written), "all"
  ARGV[2]     np; ARGV[3] the request-id record's time-to-live in ms, ""
              in a compact call (no item carries a request_id: 2 ARGV an
              item, and a RECORD of its first 8 numbers)
  ARGV[4+4(j-1) .. 7+4(j-1)]  policy j: version stamp, max_permits,
              window_ms, ""
  ARGV[b+w(i-1) .. b+w(i-1)+w-1], b = 4 + 4 np, w = 4 (2 compact):
              item i's policy index, permits, then with w = 4
              request_id ("" none), lease_id (unused)
  ARGV[b+wn+(i-m-1)]  item i's key for i = m+1..n (keys of several slots
              of one master: lua/bucket.lua's header), n = (#ARGV - b + 1
              + m) / (w + 1). Every key is read before any is written.

The state: one ZSET per key, simple to read for an inspector:
  member "<t>:<i>", score t   one per permit taken at Redis time t (us),
                              i = 1, 2, ... within one take (so members
                              are unique: t is later than every entry
                              already there, see below)
  member "v", score -stamp    the version stamp of the policy it was last
                              written under (negated: entries score > 0,
                              the stamp <= 0, so `ZRANGEBYSCORE key (0
                              +inf` is the log and ZSCORE key v its stamp)
An entry counts while now < t + W, i.e. t > now - W. A take's entries are
scored t = now, or one us after the newest entry when that is not before
now (Redis time stepped back, or two calls in one us): an entry scored
later than its take ages out later, so the log only errs on the safe side.

A take of `permits` is allowed when count + permits <= max_permits, count
= ZCOUNT key (now - W, +inf). Its retry_after_ms (denied: nothing taken) is
when enough entries age out: with k = count + permits - max_permits, the
k-th oldest entry of the window, scored t_k, ages out at t_k + W, so
retry_after_ms = ceil((t_k + W - now) / 1000), after which a take of the
same permits is allowed if nobody else takes. reset_after_ms: until the
newest entry ages out (then nothing limits), and the key expires then too
(PEXPIRE), so a key that limits nothing holds no memory. A take prunes the
entries that aged out (ZREMRANGEBYSCORE key (0 now-W) before adding its
own; a denial and a peek write nothing.

Costs per item: ZSCORE, ZCOUNT and the newest entry (ZRANGE -1 -1): three
O(log N) reads; on a denial one more (ZRANGEBYSCORE ... LIMIT k-1 1); on a
take ZREMRANGEBYSCORE, ZADD of the stamp and of `permits` entries,
PEXPIRE. Memory: one entry per permit in the window, members of about 18
bytes; Redis keeps up to 128 entries as a listpack and more as a
skiplist: MEMORY USAGE of a key of 10 entries is about 410 bytes, of 1000
entries about 119 kB (test_algorithm_scripts.py prints it), so about 1.2
MB for a key at the cap of 10000.

The answer: per item one 112-byte RECORD, struct '<dddddddddd' = status,
allowed, remaining, limit, retry_after_ms, reset_after_ms, window_s,
level_micro, lease_expires_ms, flags, then 32 "\0" bytes (no lease); as in
lua/sliding_window.lua: status 0, -10 aborted ("all"), -11 out_of_range
(permits > max_permits), -15 data_loss (the key is not a ZSET; remaining
0), -17 stale (the key was written under a newer stamp: remaining that
stamp, nothing written); remaining = max_permits - count after the take;
window_s = ceil(window_ms / 1000); level_micro = remaining * 1e6; flags 1 =
replayed. Request ids as in lua/sliding_window.lua: on take and all, an
item whose record key (state key .. "\x1f" .. "r" .. request_id) exists
answers that RECORD with flags |= 1 and takes nothing; otherwise its
answer, when allowed (status 0, allowed 1), is stored there with PX = ARGV[3].

Mode "inspect" (the admin inspector: limiter_inspect() in
server/decisions/limiter.c): a peek of one permit for one item, nothing
written, answered as an array of integers: the RECORD's ten numbers, then
0 (no window to reset), the entries in the window now (one per permit), k
and the ages in ms (Redis time) of the k newest of them, newest first, k
<= 100 (one more ZREVRANGEBYSCORE), then 0 (no leases).
]]

local SCRIPT, P1 = 'sliding_log.lua', 'window_ms'   -- lua/lib/item.lua's errors name them
-- @include call.lua
local CHUNK = 500                   -- entries per ZADD (Lua's unpack() limit)

if mode ~= 'take' and mode ~= 'peek' and mode ~= 'all' and mode ~= 'refund' and
   mode ~= 'charge' then
  if mode ~= 'hold' then
    return redis.error_reply('sliding_log.lua: mode "' .. tostring(mode) ..
                             '" is not one of take, peek, all, refund, charge, hold')
  end
  -- @include hold.lua
end
-- @include keys.lua

-- @include ms_up.lua

local policies = {}
local function policy(j)
  local p = policies[j]
  if not p then
    local at = 4 + 4 * (j - 1)
    local max, wms = tonumber(ARGV[at + 1]), tonumber(ARGV[at + 2])
    if not max or not wms or max < 1 or wms < 1 then
      return nil
    end
    local w = wms * 1000
    p = {ver = tonumber(ARGV[at]), max = max, w = w, window_s = ceil(wms / 1000),
         cutoff = '(' .. string.format('%d', now - w)}
    policies[j] = p
  end
  return p
end

-- The Redis time at which a key's log lets `want` more permits in, when
-- `have` are counted now (the entries in the window, then `pending` of
-- this call's own at `st.at`). Reads the k-th oldest entry of the window
-- (before any write of the call).
local function passes_at(k, st, have, want)
  local p = st.p
  local age = have + want - p.max   -- entries that must age out
  if age <= 0 then
    return now
  end
  if age <= st.count then
    local e = redis.call('ZRANGEBYSCORE', k, p.cutoff, '+inf', 'WITHSCORES', 'LIMIT', age - 1, 1)
    return tonumber(e[2]) + p.w
  end
  return st.at + p.w                -- one of this call's own entries
end

local function reset_after(st)
  if st.pending > 0 then
    return ms_up(st.at + st.p.w - now)
  elseif st.count > 0 then
    return ms_up(st.newest + st.p.w - now)
  end
  return 0
end

-- refund (issue 38): permits given back, in lua/lib/refund_sliding_log.lua.
if mode == 'refund' or mode == 'charge' then
  -- @include refund_sliding_log.lua
end

-- Phase 1: every key read (logs and request records) before any write.
local states, order = {}, {}
local records = {}
local items = {}
for i = 1, n do
  local at = base + per * (i - 1)
  local it = {j = ARGV[at] == '1' and 1 or tonumber(ARGV[at]),
              want = ARGV[at + 1] == '1' and 1 or tonumber(ARGV[at + 1]),
              rid = per == 4 and ARGV[at + 2] or '',
              key = keys[i]}
  -- @include item.lua
  local k = it.key
  if not states[k] then
    local st
    local v = redis.pcall('ZSCORE', k, 'v')
    if type(v) == 'table' and v.err then
      if not string.find(v.err, 'WRONGTYPE', 1, true) then
        return v     -- e.g. a non local key: the call fails, nothing written
      end
      st = {foreign = 0, total = 0}
    else
      local p = it.p
      local count = redis.call('ZCOUNT', k, p.cutoff, '+inf')
      local newest = 0
      if count > 0 then
        newest = tonumber(redis.call('ZRANGE', k, -1, -1, 'WITHSCORES')[2])
      end
      local t = now
      if newest >= t then
        t = newest + 1
      end
      st = {p = p, ver = v and -tonumber(v) or 0, count = count, newest = newest, at = t,
            pending = 0, total = 0}
    end
    states[k] = st
    order[#order + 1] = k
  end
end

-- Phase 2: the items in order; items of one key see each other's takes.
local out = {}
local refused, errored = false, false
local fresh = {}
for i = 1, n do
  local it = items[i]
  local p, st = it.p, states[it.key]
  local rec = it.rkey and (fresh[it.rkey] or records[it.rkey])
  if rec then
    -- @include replay.lua
  elseif it.want > p.max then
    out[i], it.status = pack(RECORD, OUT_OF_RANGE, 0, 0, p.max, 0, 0, 0, 0, 0, 0) .. NO_LEASE, OUT_OF_RANGE
    refused, errored = true, true
  elseif st.foreign then
    out[i], it.status = pack(RECORD, DATA_LOSS, 0, st.foreign, p.max, 0, 0, 0, 0, 0, 0) .. NO_LEASE, DATA_LOSS
    refused, errored = true, true
  elseif st.ver > p.ver then
    out[i], it.status = pack(RECORD, STALE, 0, st.ver, p.max, 0, 0, 0, 0, 0, 0) .. NO_LEASE, STALE
    refused, errored = true, true
  else
    it.status = 0
    local have = st.count + st.pending
    local ok = have + it.want <= p.max
    local retry = 0
    st.total = st.total + it.want
    if ok and mode ~= 'peek' then
      st.pending = st.pending + it.want
      have = have + it.want
    elseif not ok then
      retry = ms_up(passes_at(it.key, st, have, it.want) - now)
      refused = refused or mode ~= 'peek'
    end
    local left = p.max - have
    out[i] = pack(RECORD, 0, ok and 1 or 0, left, p.max, retry, reset_after(st), p.window_s,
                  left * 1000000, 0, 0) .. NO_LEASE
    if it.rkey then
      fresh[it.rkey] = out[i]
    end
  end
end

-- "all" refused: nothing is taken (as lua/sliding_window.lua).
if mode == 'all' and refused then
  local never, longest = false, 0
  for _, st in pairs(states) do
    st.pending = 0
  end
  if not errored then
    for k, st in pairs(states) do
      if st.total == 0 then
        -- no item of the call decided on it
      elseif st.total > st.p.max then
        never = true
      else
        local wait = ms_up(passes_at(k, st, st.count, st.total) - now)
        if wait > longest then
          longest = wait
        end
      end
    end
  end
  local function waiting(st, p)     -- built only here: a refused "all"
    local left = p.max - st.count
    return pack(RECORD, 0, 0, left, p.max, longest, reset_after(st), p.window_s,
                left * 1000000, 0, 0) .. NO_LEASE
  end
  -- @include all_refused.lua
end

-- Phase 3: the writes: each log taken from pruned, stamped, its entries
-- added, set to expire when its newest entry ages out; then the answers
-- with a request id.
if mode ~= 'peek' then
  for _, k in ipairs(order) do
    local st = states[k]
    if not st.foreign and st.pending > 0 then
      local p = st.p
      redis.call('ZREMRANGEBYSCORE', k, '(0', string.format('%d', now - p.w))
      redis.call('ZADD', k, -p.ver, 'v')
      local t = string.format('%d', st.at)
      local args, i = {}, 0
      while i < st.pending do
        i = i + 1
        args[#args + 1] = t
        args[#args + 1] = t .. ':' .. i
        if #args >= 2 * CHUNK or i == st.pending then
          redis.call('ZADD', k, unpack(args))
          args = {}
        end
      end
      redis.call('PEXPIRE', k, format('%d', ms_up(st.at + p.w - now)))
    end
  end
  -- @include records.lua
end

if inspect then
  -- @include inspect.lua
  local it = items[1]
  local st = states[it.key]
  r[11], r[12], r[13] = 0, 0, 0
  if not st.foreign and st.ver <= it.p.ver then
    r[12] = st.count
    local e = redis.call('ZREVRANGEBYSCORE', it.key, '+inf', it.p.cutoff, 'WITHSCORES',
                         'LIMIT', 0, 100)
    for x = 2, #e, 2 do
      local age = floor((now - tonumber(e[x])) / 1000)
      r[#r + 1] = age > 0 and age or 0
    end
    r[13] = #e / 2
  end
  r[#r + 1] = 0                           -- no leases
  return r
end

-- hold (issue 38: a reservation's all-or-nothing take, lua/lib/hold.lua):
-- the answers, then the Redis time of the decision.
if ARGV[1] == 'hold' then
  return table.concat(out) .. pack('<d', now)
end
return table.concat(out)
