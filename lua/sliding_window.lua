--[[
sliding_window.lua - sliding-window-counter decisions, atomically, inside
Redis (issue 20).

A policy of algorithm sliding_window admits at most max_permits in a
window of window_ms, estimated from two counters: the permits taken in the
current fixed window (aligned to multiples of the window since the Unix
epoch, in Redis time) and those of the previous one, weighted by the share
of the previous window that the sliding window still covers. Nearly the
sliding log's answer at the memory of one short string per key.

The call (the contract of every decision script, issue 20; the same
as lua/sliding_log.lua's and lua/concurrency.lua's):
  KEYS[i]     item i's state key, for i = 1..m (m = #KEYS: one Redis
              Cluster slot; server/stores/policy.c lays the keys out,
              letter s)
  ARGV[1]     mode: "take" (Acquire), "peek" (nothing taken, nothing
              written), "all" (all or nothing: every item is granted, or
              none takes anything)
  ARGV[2]     np, the number of policies whose limits follow
  ARGV[3]     how long a take's answer is kept for its request_id, in ms
              (0: not kept); "" in a compact call, one whose items carry
              no request_id and no lease_id (lua/bucket.lua's header): 2
              ARGV an item and a RECORD of its first 8 numbers (64 bytes)
  ARGV[4+4(j-1) .. 7+4(j-1)]  policy j: its version stamp, max_permits,
              window_ms, "" (unused)
  ARGV[b+w(i-1) .. b+w(i-1)+w-1]  with b = 4 + 4 np, w = 4 (2 in a
              compact call): item i's policy (j, 1..np), permits (>= 1),
              then with w = 4 request_id ("" none), lease_id (unused here)
  ARGV[b+wn+(i-m-1)]  for i = m+1..n: item i's state key, when the items'
              keys span several slots of one Redis Cluster master; n =
              (#ARGV - b + 1 + m) / (w + 1). lua/bucket.lua's header says what
              Redis 7.0.15 allows such a call: here too every key is read
              before any is written, so a "non local key" error leaves
              nothing written.

The state: one 32-byte string, struct '<dddd' = the previous window's
count, the current window's count, the current window's start (Redis time
in us, a multiple of window_ms * 1000), and the version stamp of the
policy it was last written under. Easy to read for an inspector: unpack
the four numbers. A missing key reads as two empty windows.

The estimate at Redis time t, e = t - start (0 <= e < W, W = window in us):
    weighted(t) = prev * (W - e) / W + cur
A take of `permits` is allowed when weighted(now) + permits <= max_permits,
and adds permits to cur. As t grows, the current window rolls: cur becomes
prev (one window on) or both empty (two or more on). weighted() never
grows with time while nothing is taken (at a window's end prev's weight is
0 and cur's 1; at the next start cur, now prev, weighs 1), which is what
makes retry_after_ms exact: the smallest wait, rounded up to whole ms,
after which weighted(now + wait) + permits <= max_permits, computed from
the formula and then checked against the very function the next decision
uses. Lua numbers are doubles: prev * (W - e) is exact below 2^53 (for a
one-hour window, max_permits up to 2.5 million); beyond, the estimate
carries a relative rounding of 2^-52, the same in every decision.

The bound (what sliding_window guarantees; tests/integration/
test_algorithm_scripts.py checks it on recorded runs of two instances):
  1. Each aligned window admits at most max_permits (cur <= weighted).
  2. Any interval of length W admits at most max_permits + c * x / W < 2 *
     max_permits (at most 2 max_permits - 1 permits), where the interval
     starts x us into an aligned window that admitted c. Proof: the
     interval [a, a + W), a = start_k + x, covers the tail of window k,
     which admitted at most c = c_k, and the first x us of window k+1.
     At the last take of window k+1 in it, at e < x, the decision saw
     cur + c * (W - e) / W + permits <= max, so window k+1 admitted at
     most max - c * (W - x) / W up to it. The sum is max + c * x / W,
     and c <= max, x < W. The worst case: max taken at the very end of
     window k, then the permits as they come free in window k+1.
  3. When the takes of each window are spread evenly over it (steady
     traffic), an interval of length W holds (W - x) / W * c_k + x / W *
     c_{k+1}, a mean of two counts each <= max_permits: at most max.

Clock: Redis TIME only. A state whose window starts after now (Redis time
stepped back) is read as if now were its start: its previous window
weighs in full, so it admits no more than before the step.

The answer: per item one 112-byte RECORD, struct '<dddddddddd' = status,
allowed, remaining, limit, retry_after_ms, reset_after_ms, window_s,
level_micro, lease_expires_ms, flags, then 32 bytes of lease id (here
always 32 "\0" bytes):
  status     0, -10 aborted ("all": another item was refused), -11
             out_of_range (permits > max_permits; in "all", the items of
             one key together), -15 data_loss (the key holds what this
             script did not write; remaining its size), -17 stale (written
             under a newer version stamp than the call's; remaining that
             stamp; nothing written: permitd reloads the policy, retries)
  allowed    1 or 0 (a peek answers whether a take would be allowed)
  remaining  floor(max_permits - weighted(now)) after this item's take
  retry_after_ms  0 when allowed, else as above
  reset_after_ms  until weighted() is 0: the end of the window after the
             current one while cur > 0, else the current window's end
  window_s   ceil(window_ms / 1000); level_micro remaining * 1e6;
  lease_expires_ms 0; flags: 1 = replayed (see below)

Request ids: on "take" and "all", an item with a request_id whose record
key (its state key .. "\x1f" .. "r" .. request_id: same slot) exists
answers that stored RECORD with flags |= 1 and takes nothing; otherwise
its answer, when allowed, is stored there with PX = ARGV[3] (not a denial,
which took nothing: its retry is decided afresh; not an error such as
stale, which permitd retries). Two items of one call with the same id and
key: the second replays the first.

Writes: a take writes its key once, at the end, stamped with the call's
version stamp, set to expire when it limits nothing any more (reset_after);
a denial and a peek write nothing. Costs per item: one GET and, after a
take, one SET (plus a GET and a SET per request id); 32 bytes of value.

Mode "inspect" (the admin inspector: limiter_inspect() in
server/decisions/limiter.c): a peek of one permit for one item, nothing
written, answered as an array of integers: the RECORD's ten numbers, then
the ms until the current aligned window ends (when cur becomes prev),
then 0, 0, 0 (the layout's events, log entries and leases: none here).
]]

local SCRIPT, P1 = 'sliding_window.lua', 'window_ms'   -- lua/lib/item.lua's errors name them
-- @include call.lua
local STATE = '<dddd'

if mode ~= 'take' and mode ~= 'peek' and mode ~= 'all' and mode ~= 'refund' and
   mode ~= 'charge' then
  if mode ~= 'hold' then
    return redis.error_reply('sliding_window.lua: mode "' .. tostring(mode) ..
                             '" is not one of take, peek, all, refund, charge, hold')
  end
  -- @include hold.lua
end
-- @include keys.lua

-- One item without a request id (a lone Acquire or Peek: nearly every
-- call), its common case decided here, before the helpers below are built
-- (each `local function` and table of the chunk is built on every call:
-- lua/fixed_window.lua, tests/bench/redis-cost.sh): a state of this
-- policy version or older, or none, and a take or peek that passes. Its
-- formulas are roll(), weighted(), reset_after() and ms_up()'s below;
-- change them together. Anything else (a denial, an error) goes on to
-- the phases below, which decide it as any item.
if n == 1 and m == 1 and per == 2 and (mode == 'take' or mode == 'peek') and not inspect then
  local ver, max, wms = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
  local want = ARGV[base + 1] == '1' and 1 or tonumber(ARGV[base + 1])
  local s = max and wms and want and max >= 1 and wms >= 1 and want >= 1 and want <= max and
            want == floor(want) and redis.pcall('GET', KEYS[1])
  if s ~= nil and type(s) ~= 'table' and (not s or #s == 32) then
    local prev, cur, start, v = 0, 0, 0, 0
    if s then
      prev, cur, start, v = unpack_struct(STATE, s)
    end
    local w = wms * 1000
    local at = now - now % w            -- roll()
    if at == start + w then
      prev, cur, start = cur, 0, at
    elseif at > start then
      prev, cur, start = 0, 0, at
    end
    local e = now - start               -- weighted()
    if e < 0 then
      e = 0
    end
    local weight = prev * (w - e) / w
    if v <= ver and weight + cur + want <= max then
      if mode == 'take' then
        cur = cur + want
      end
      local reset = cur > 0 and start + 2 * w - now or prev > 0 and start + w - now or 0
      if reset <= 0 then                -- reset_after(), ms_up()
        reset = 0
      else
        reset = ceil(reset / 1000)
        if reset > FOREVER_MS then
          reset = FOREVER_MS
        end
      end
      if mode == 'take' and reset > 0 then
        redis.call('SET', KEYS[1], pack(STATE, prev, cur, start, ver), 'PX', format('%d', reset))
      end
      local left = floor(max - (weight + cur))
      if left < 0 then
        left = 0
      end
      return pack(RECORD, 0, 1, left, max, 0, reset, ceil(wms / 1000), left * 1000000)
    end
  end
end

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
    p = {ver = tonumber(ARGV[at]), max = max, w = wms * 1000, window_s = ceil(wms / 1000)}
    policies[j] = p
  end
  return p
end

-- The counts (prev, cur) and the current window's start at time t of a
-- state that held them with its window starting at `start`.
local function roll(prev, cur, start, w, t)
  local s = t - t % w
  if s <= start then
    return prev, cur, start       -- same window (or the clock stepped back)
  elseif s == start + w then
    return cur, 0, s
  end
  return 0, 0, s
end

local function weighted(prev, cur, start, w, t)
  local e = t - start
  if e < 0 then
    e = 0
  end
  return prev * (w - e) / w + cur
end

local function allows(prev, cur, start, w, max, want, t)
  local p2, c2, s2 = roll(prev, cur, start, w, t)
  return weighted(p2, c2, s2, w, t) + want <= max
end

-- The smallest whole ms to wait from now until a take of `want` passes a
-- state (prev, cur, start) rolled to now (nothing taken meanwhile): the
-- formula's answer, then checked with allows(), as the next decision will.
local function retry_after(prev, cur, start, w, max, want)
  local at   -- Redis time (us) when it passes
  local need = max - cur - want
  if need >= 0 and prev > 0 then
    at = start + ceil(w - need * w / prev)   -- within this window
    if at < now then
      at = now
    end
    if at >= start + w then
      at = nil
    end
  end
  if not at then
    if cur <= 0 then
      at = start + w
    else
      local e = ceil(w - (max - want) * w / cur)
      if e < 0 then
        e = 0
      end
      at = start + w + e
    end
  end
  local ms = ms_up(at - now)
  local step = 1
  while not allows(prev, cur, start, w, max, want, now + ms * 1000) do
    ms = ms + step
    if ms > 3 then
      step = step * 2
    end
  end
  if ms > FOREVER_MS then
    return FOREVER_MS
  end
  return ms
end

local function reset_after(prev, cur, start, w)
  if cur > 0 then
    return ms_up(start + 2 * w - now)
  elseif prev > 0 then
    return ms_up(start + w - now)
  end
  return 0
end

-- refund (issue 38): permits given back, in lua/lib/refund_sliding_window.lua.
if mode == 'refund' or mode == 'charge' then
  -- @include refund_sliding_window.lua
end

-- Phase 1: every key read (states and request records) before any write.
local states = {}       -- key -> state table
local records = {}      -- record key -> stored RECORD or false
local items = {}
for i = 1, n do
  local at = base + per * (i - 1)
  local it = {j = ARGV[at] == '1' and 1 or tonumber(ARGV[at]),
              want = ARGV[at + 1] == '1' and 1 or tonumber(ARGV[at + 1]),
              rid = per == 4 and ARGV[at + 2] or '',
              key = keys[i]}
  -- @include item.lua
  if not states[it.key] then
    local s = redis.pcall('GET', it.key)
    local st
    if type(s) == 'table' and s.err then
      if string.find(s.err, 'WRONGTYPE', 1, true) then
        st = {foreign = 0, total = 0}
      else
        return s     -- e.g. a non local key: the call fails, nothing written
      end
    elseif s and #s ~= 32 then
      st = {foreign = #s, total = 0}
    else
      local prev, cur, start, ver = 0, 0, 0, 0
      if s then
        prev, cur, start, ver = unpack_struct(STATE, s)
      end
      local p = it.p
      prev, cur, start = roll(prev, cur, start, p.w, now)
      st = {p = p, exists = s and true or false, ver = ver, prev = prev, cur = cur, start = start,
            orig_cur = cur, total = 0, taken = false}
    end
    states[it.key] = st
  end
end

-- Phase 2: the items in order; items of one key see each other's takes.
local out = {}
local refused, errored = false, false
local fresh = {}        -- record key -> the RECORD this call answers for it
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
    local ok = weighted(st.prev, st.cur, st.start, p.w, now) + it.want <= p.max
    local retry = 0
    st.total = st.total + it.want
    if ok and mode ~= 'peek' then
      st.cur, st.taken = st.cur + it.want, true
    elseif not ok then
      retry = retry_after(st.prev, st.cur, st.start, p.w, p.max, it.want)
      refused = refused or mode ~= 'peek'
    end
    local left = floor(p.max - weighted(st.prev, st.cur, st.start, p.w, now))
    if left < 0 then
      left = 0
    end
    out[i] = pack(RECORD, 0, ok and 1 or 0, left, p.max, retry,
                  reset_after(st.prev, st.cur, st.start, p.w), p.window_s, left * 1000000, 0, 0) ..
             NO_LEASE
    if it.rkey then
      fresh[it.rkey] = out[i]
    end
  end
end

-- "all" refused: nothing is taken. An item refused on its own (an error)
-- aborts the others; else every item answers the longest of its keys'
-- waits for their totals (a key's total beyond max_permits: out_of_range).
if mode == 'all' and refused then
  local never, longest = false, 0
  if not errored then
    for _, st in pairs(states) do
      if st.total > 0 then
        local p = st.p
        if st.total > p.max then
          never = true
        else
          st.cur = st.orig_cur
          if weighted(st.prev, st.cur, st.start, p.w, now) + st.total > p.max then
            local wait = retry_after(st.prev, st.cur, st.start, p.w, p.max, st.total)
            if wait > longest then
              longest = wait
            end
          end
        end
      end
    end
  end
  local function waiting(st, p)     -- built only here: a refused "all"
    local left = floor(p.max - weighted(st.prev, st.orig_cur, st.start, p.w, now))
    if left < 0 then
      left = 0
    end
    return pack(RECORD, 0, 0, left, p.max, longest,
                reset_after(st.prev, st.orig_cur, st.start, p.w), p.window_s,
                left * 1000000, 0, 0) .. NO_LEASE
  end
  -- @include all_refused.lua
  for _, st in pairs(states) do
    st.taken = false
  end
end

-- Phase 3: the writes. Each state taken from is written once; each new
-- answer with a request id is kept for ARGV[3] ms.
if mode ~= 'peek' then
  for k, st in pairs(states) do
    if st.taken then
      local ttl = reset_after(st.prev, st.cur, st.start, st.p.w)
      if ttl > 0 then
        redis.call('SET', k, pack(STATE, st.prev, st.cur, st.start, st.p.ver), 'PX', format('%d', ttl))
      end
    end
  end
  -- @include records.lua
end

if inspect then
  -- @include inspect.lua
  local p = items[1].p
  r[11] = ms_up(p.w - now % p.w)          -- until the current window ends
  r[12], r[13], r[14] = 0, 0, 0           -- no log, no leases
  return r
end

-- hold (issue 38: a reservation's all-or-nothing take, lua/lib/hold.lua):
-- the answers, then the Redis time of the decision.
if ARGV[1] == 'hold' then
  return table.concat(out) .. pack('<d', now)
end
return table.concat(out)
