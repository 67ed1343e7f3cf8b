--[[
fixed_window.lua - fixed-window counter decisions (issue 20), atomically,
inside Redis: at most max_permits are granted per window.

The call is every decision script's (lua/bucket.lua's header has the
layout in full): KEYS the items' state keys (one slot; the keys of other
slots of the same master follow the items in ARGV), ARGV[1] the mode
("take", "peek", "all"), ARGV[2] np, ARGV[3] the request-id time-to-live
in ms ("" in a compact call: no item carries a request id),
ARGV[4+4(j-1)..7+4(j-1)] policy j: version stamp, max_permits,
window_ms, calendar; then per item: policy j, permits, and but in a
compact call request id, lease id (unused here). The answer is one
RECORD of 112 bytes per item, as bucket.lua's (status, allowed,
remaining, limit, retry_after_ms, reset_after_ms, window_s, level_micro,
lease_expires_ms 0, flags; 32 "\0" bytes of lease), its first 8 numbers
alone (64 bytes) in a compact call, and request ids are kept and
replayed as bucket.lua does.

Windows. Without a calendar ("" in p2), the windows are window_ms long and
counted from the Unix epoch (window k is [k*W, (k+1)*W) in Redis time), so
every instance and every key agrees on where one ends. With one, a window
is a unit of the UTC calendar: a minute, an hour, a day (00:00 UTC to
00:00), or a month (00:00 on the 1st to 00:00 on the 1st of the next),
whatever its length: "10,000 a month" starts again on the 1st. The month
is found from Redis TIME with days-from-civil arithmetic (Howard Hinnant's
algorithm, proleptic Gregorian, exact for every day Lua's doubles hold),
no table of month lengths, no leap second (Redis TIME has none).

Exactness: within one window, granted permits <= max_permits, across any
number of permitd instances (one atomic script per decision, the clock
Redis TIME). A denial takes nothing; its retry_after_ms is the time to the
next window (rounded up to the millisecond, so a retry then lands in it),
where every request of at most max_permits succeeds if nobody else takes.
reset_after_ms is the time to the window's end when it holds any take
(0 when it holds none); window_s the window's length in seconds, rounded
up (the RateLimit-Policy `w`); level_micro remaining * 10^6.

State: one 24-byte string, '<ddd': the count taken in the window, the
window's start (Redis time, us) and the version stamp of the policy it
was written under. The key expires at the window's end (PX), so a window
that ends is no key and a missing key reads as an empty window; a state
whose start is not the current window's is a past window: empty. A state
written under a newer version stamp than the call's answers -17 (stale)
and nothing is written; one that is no 24-byte state answers -15
(data_loss, `remaining` its size) and is left alone. Every key is read
before any is written (see bucket.lua on Redis Cluster's non local keys).
Each state key is written once per call, at the end.

Mode "inspect" (the admin inspector: limiter_inspect() in
server/decisions/limiter.c): a peek of one permit for one item, nothing
written, answered as an array of integers: the RECORD's ten numbers, then
the ms until the current window ends (whether it holds a take or not),
then 0, 0, 0 (the layout's events, log entries and leases: none here).
]]

local SCRIPT = 'fixed_window.lua'
-- @include call.lua
local sub = string.sub
local STATE = '<ddd'

if mode ~= 'take' and mode ~= 'peek' and mode ~= 'all' and mode ~= 'refund' and
   mode ~= 'charge' then
  if mode ~= 'hold' then
    return redis.error_reply('fixed_window.lua: mode "' .. tostring(mode) ..
                             '" is not one of take, peek, all, inspect, refund, charge, hold')
  end
  -- @include hold.lua
end
-- @include keys.lua

-- One item without a request id (a lone Acquire or Peek: nearly every
-- call), its common case decided here, before the helpers below are built
-- (each `local function` and table of the chunk is built on every call:
-- they cost a lone Acquire about half of its instructions,
-- tests/bench/redis-cost.sh): a window of window_ms or of a calendar
-- minute, hour or day (a month needs the civil-date helpers), a state of
-- this policy version or older, or none; a take that is granted, or a
-- peek. Its formulas are bounds(), policy() and counter()'s below; change
-- them together. Anything else (a denial, a month, an error) goes on to
-- the path below, which decides it as any item.
if n == 1 and per == 2 and (mode == 'take' or mode == 'peek') and not inspect then
  local ver, max, wms, cal = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6]), ARGV[7]
  local want = ARGV[base + 1] == '1' and 1 or tonumber(ARGV[base + 1])
  local w = cal == '' and wms and wms * 1000 or cal == 'minute' and 60000000 or
            cal == 'hour' and 3600000000 or cal == 'day' and 86400000000
  if w and w > 0 and max and max >= 1 and want <= max then
    local start = floor(now / w) * w
    local s = redis.call('GET', KEYS[1])
    local count, plain = 0, not s
    if s and #s == 24 then
      local stored, at, v = unpack_struct(STATE, s)
      plain = v <= ver
      if at >= start then
        count = stored    -- this window (or, the clock stepped back, a later one)
      end
    end
    if plain and (mode == 'peek' or count + want <= max) then
      local left = ceil((start + w - now) / 1000)   -- ms to the window's end, >= 1
      if mode == 'take' then
        count = count + want
        redis.call('SET', KEYS[1], pack(STATE, count, start, ver), 'PX', format('%d', left))
      end
      return pack(RECORD, 0, 1, max - count, max, 0, count > 0 and left or 0, ceil(w / 1000000),
                  (max - count) * 1000000)
    end
  end
end

-- Days since 1970-01-01 of the civil date y-m-d, and back (Hinnant).
local function days_from_civil(y, m, d)
  if m <= 2 then
    y = y - 1
  end
  local era = floor(y / 400)
  local yoe = y - era * 400
  local mp = (m + 9) % 12
  local doy = floor((153 * mp + 2) / 5) + d - 1
  local doe = yoe * 365 + floor(yoe / 4) - floor(yoe / 100) + doy
  return era * 146097 + doe - 719468
end

local function civil_from_days(z)
  z = z + 719468
  local era = floor(z / 146097)
  local doe = z - era * 146097
  local yoe = floor((doe - floor(doe / 1460) + floor(doe / 36524) - floor(doe / 146096)) / 365)
  local y = yoe + era * 400
  local doy = doe - (365 * yoe + floor(yoe / 4) - floor(yoe / 100))
  local mp = floor((5 * doy + 2) / 153)
  local m = mp < 10 and mp + 3 or mp - 9
  if m <= 2 then
    y = y + 1
  end
  return y, m
end

local UNIT_US = {minute = 60000000, hour = 3600000000, day = 86400000000}

-- The window holding `now` under window_ms / calendar: its start and end
-- (us), or nil when the policy names neither.
local function bounds(window_ms, calendar)
  if calendar == 'month' then
    local y, m = civil_from_days(floor(now / 86400000000))
    local start = days_from_civil(y, m, 1) * 86400000000
    if m == 12 then
      y, m = y + 1, 1
    else
      m = m + 1
    end
    return start, days_from_civil(y, m, 1) * 86400000000
  end
  local w = UNIT_US[calendar] or (calendar == '' and window_ms and window_ms * 1000)
  if not w or w <= 0 then
    return nil
  end
  local start = floor(now / w) * w
  return start, start + w
end

local policies = {}
local function policy(j)
  local p = policies[j]
  if not p then
    local at = 4 + 4 * (j - 1)
    p = {ver = tonumber(ARGV[at]), max = tonumber(ARGV[at + 1])}
    p.start, p.stop = bounds(tonumber(ARGV[at + 2]), ARGV[at + 3])
    if p.start then
      p.window = ceil((p.stop - p.start) / 1000000)
      p.left = ceil((p.stop - now) / 1000)    -- ms to the window's end, >= 1
    end
    policies[j] = p
  end
  return p
end

-- refund (issue 38): permits given back, in lua/lib/refund_fixed_window.lua.
if mode == 'refund' or mode == 'charge' then
  -- @include refund_fixed_window.lua
end

-- Every key read before any is written: the states, then the records.
local states = {}
for i = 1, n do
  states[i] = redis.call('GET', keys[i])
end
local rkeys, replayed = {}, {}
for i = 1, per == 4 and n or 0 do
  local rid = ARGV[base + 4 * (i - 1) + 2]
  rkeys[i] = (mode == 'take' or mode == 'all') and rid ~= '' and keys[i] .. '\31r' .. rid
  replayed[i] = rkeys[i] and redis.call('GET', rkeys[i])
end

-- Item i's window counter, shared by the items of the call that name the
-- same key: {count (after this call's takes), orig (before)}, or
-- {foreign = size} / {stale = stamp}.
local counters, written = {}, {}
local function counter(i, p)
  local k = keys[i]
  local c = counters[k]
  if not c then
    local s, count = states[i], 0
    if s then
      if #s ~= 24 then
        c = {foreign = #s}
      else
        local stored, start, ver = unpack_struct(STATE, s)
        if ver > p.ver then
          c = {stale = ver}
        elseif start >= p.start then
          count = stored    -- this window (or, the clock stepped back, a later one)
        end
      end
    end
    if not c then
      c = {key = k, count = count, orig = count, p = p, taken = false}
      written[#written + 1] = c
    end
    counters[k] = c
  end
  return c
end

local function answer(status, allowed, remaining, max, retry, reset, window)
  return pack(RECORD, status, allowed, remaining, max, retry, reset, window,
              remaining * 1000000, 0, 0) .. NO_LEASE
end

local out, item_counter, refused = {}, {}, false
for i = 1, n do
  local j, want = ARGV[base + per * (i - 1)], ARGV[base + per * (i - 1) + 1]
  local p = policy(j == '1' and 1 or tonumber(j))
  want = want == '1' and 1 or tonumber(want)
  if replayed[i] then
    local flags = unpack_struct('<d', replayed[i], 73)
    if flags % 2 == 0 then
      flags = flags + 1
    end
    out[i] = sub(replayed[i], 1, 72) .. pack('<d', flags) .. sub(replayed[i], 81)
    rkeys[i] = false
  elseif not p.start or not p.max or p.max < 1 then
    out[i] = answer(-13, 0, 0, p.max or 0, 0, 0, 0)     -- no window: not permitd's policy
    rkeys[i], refused = false, true
  elseif want > p.max then
    out[i] = answer(-11, 0, 0, p.max, 0, 0, 0)
    rkeys[i], refused = false, true
  else
    local c = counter(i, p)
    if c.foreign or c.stale then
      out[i] = pack(RECORD, c.foreign and -15 or STALE, 0, c.foreign or c.stale, p.max,
                    0, 0, 0, 0, 0, 0) .. NO_LEASE
      rkeys[i], refused = false, true
    else
      item_counter[i] = c
      local allowed, retry = 1, 0
      if mode ~= 'peek' and c.count + want <= p.max then
        c.count, c.taken = c.count + want, true
      elseif mode ~= 'peek' then
        allowed, retry, refused = 0, p.left, true   -- the next window
      end
      out[i] = answer(0, allowed, p.max - c.count, p.max, retry, c.count > 0 and p.left or 0,
                      p.window)
    end
  end
end

if mode == 'all' and refused then
  -- Nothing is granted (see bucket.lua): an item refused on its own
  -- aborts the others; else all pass in the next window, unless one
  -- counter's items together ask more than max_permits (out_of_range).
  local total, errored, never = {}, false, false
  for i = 1, n do
    local c = item_counter[i]
    if c then
      total[c] = (total[c] or 0) + tonumber(ARGV[base + per * (i - 1) + 1])
    elseif not replayed[i] then
      errored = true
    end
  end
  for c, want in pairs(total) do
    never = never or want > c.p.max
  end
  for i = 1, n do
    local c = item_counter[i]
    if c then
      local p = c.p
      if errored or (never and total[c] <= p.max) then
        out[i], rkeys[i] = answer(-10, 0, 0, p.max, 0, 0, 0), false
      elseif never then
        out[i] = pack(RECORD, -11, 0, total[c], p.max, 0, 0, 0, 0, 0, 0) .. NO_LEASE
        rkeys[i] = false
      else
        local retry = 0
        for d, want in pairs(total) do
          if d.orig + want > d.p.max and d.p.left > retry then
            retry = d.p.left
          end
        end
        out[i] = answer(0, 0, p.max - c.orig, p.max, retry, c.orig > 0 and p.left or 0, p.window)
      end
    end
  end
  for _, c in ipairs(written) do
    c.taken = false
  end
end

if mode ~= 'peek' then
  for _, c in ipairs(written) do
    if c.taken then
      redis.call('SET', c.key, pack(STATE, c.count, c.p.start, c.p.ver), 'PX', format('%d', c.p.left))
    end
  end
  for i = 1, per == 4 and n or 0 do
    -- an allowed answer only: a denial took nothing, its retry is decided afresh
    if rkeys[i] and select(2, unpack_struct('<dd', out[i])) == 1 then
      redis.call('SET', rkeys[i], out[i], 'PX', rid_ttl)
    end
  end
end

if inspect then
  -- @include inspect.lua
  local p = policies[tonumber(ARGV[base])]
  r[11] = p and p.start and p.left or 0   -- until the current window ends
  r[12], r[13], r[14] = 0, 0, 0           -- no log, no leases
  return r
end

-- hold (issue 38: a reservation's all-or-nothing take, lua/lib/hold.lua):
-- the answers, then the Redis time of the decision.
if ARGV[1] == 'hold' then
  return table.concat(out) .. pack('<d', now)
end
return table.concat(out)
