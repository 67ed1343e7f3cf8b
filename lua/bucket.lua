--[[
bucket.lua - token-bucket decisions, atomically, inside Redis.

One call decides one or more items in order:
  KEYS[2i-1]  item i's policy hash   <prefix>{<policy>}:policy
  KEYS[2i]    item i's bucket state  <prefix>{<policy>}:b  or  <prefix>{<policy>}:k:<key>
  ARGV[1]     "take" (Acquire), "peek" (Peek: nothing taken), or "all"
              (all or nothing: every item is granted, or none takes anything)
  ARGV[2i]    item i's app
  ARGV[2i+1]  item i's permits (>= 1)

Returns 8 numbers per item, in order: {status, allowed, remaining, limit,
retry_after_ms, reset_after_ms, window_s, tokens_micro}. status is 0 or a
negated Connect code (server/status.h): -5 not_found, -7 permission_denied,
-9 failed_precondition (policy disabled), -11 out_of_range (more permits
than the bucket holds), -13 internal (a policy hash that is not a valid
policy). window_s is the seconds an empty bucket takes to fill (the `w` of
the RateLimit-Policy header), tokens_micro the tokens left in millionths of
a permit (for the admin UI's gauge).

App "*" skips the apps check: only permitd itself sends it (the admin bucket
inspector); a request's app can never be "*" (server/policy.c).

The bucket keeps sub-permit precision: its state is one string
"<tokens> <t>" where tokens is a double written with 17 significant digits
(so it reads back bit for bit) and t the Redis time in microseconds when
tokens was measured. Nothing is rounded on the way, so no fraction of a
permit is ever lost, and a rate such as 1/min accrues exactly one permit
per minute. The clock is Redis TIME: no client clock is trusted.

A full bucket has no state key: every write sets the key to expire when
the bucket would be full again, and a missing key reads as full. A denied
request (and every Peek) writes nothing, save that a denial re-stamps a
state stamped ahead of the Redis clock (the clock stepped back). Items of
one call that share a bucket see each other's takes, as if sent one after
the other; each bucket is written once, at the end.
]]

local mode = ARGV[1]
local n = #KEYS / 2

local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000000 + tonumber(clock[2])

-- Milliseconds are capped at FOREVER_MS (3170 years): past 1e14 a number no
-- longer reaches Redis as an integer (PX gets "1e+14"; replies overflow).
local FOREVER_MS = 99999999999999

local policies, buckets = {}, {}

-- The policy of hash key k, read once per call: {max, rate, apps, enabled,
-- window} or {status = code}.
local function policy(k)
  local p = policies[k]
  if p then
    return p
  end
  local f = redis.call('HMGET', k, 'max_permits', 'rate', 'apps', 'enabled')
  if not f[1] then
    p = {status = -5}
  else
    local max, rate = tonumber(f[1]), tonumber(f[2])
    if not max or not rate or max < 1 or rate <= 0 or rate ~= rate or not f[3] then
      p = {status = -13}
    elseif f[4] == '0' then
      p = {status = -9, max = max}
    else
      p = {max = max, rate = rate, apps = f[3],
           window = math.min(math.ceil(max / rate), FOREVER_MS)}
    end
  end
  policies[k] = p
  return p
end

-- Exact set membership: apps is a comma-separated list of names that cannot
-- themselves hold a comma; a plain find (no patterns) on ",a,b," for ",app,".
local function admits(p, app)
  if p.apps == '*' or app == '*' then
    return true
  end
  local set = ',' .. p.apps .. ','
  return string.find(set, ',' .. app .. ',', 1, true) ~= nil
      or string.find(set, ',*,', 1, true) ~= nil
end

-- The bucket of state key k: {stored, since} is the state the next decision
-- will read (after this call's writes), orig the tokens it held before.
local function bucket(k)
  local b = buckets[k]
  if b then
    return b
  end
  b = {key = k}
  local state = redis.call('GET', k)
  if state then
    local sp = string.find(state, ' ', 1, true)
    b.stored = tonumber(string.sub(state, 1, sp - 1))
    b.since = tonumber(string.sub(state, sp + 1))
    -- Redis TIME can step back (failover to a replica, NTP). A state stamped
    -- ahead of the clock counts as measured now: otherwise the bucket would
    -- stay frozen until the clock caught up. A denial re-stamps it (below),
    -- or it would never start accruing.
    if b.since > now then
      b.since = now
      b.skewed = true
    end
  end
  b.orig_stored, b.orig_since = b.stored, b.since
  buckets[k] = b
  return b
end

-- Tokens in bucket b of policy p at time `at`. The elapsed time is capped
-- at the time the bucket takes to fill before it is multiplied, so a bucket
-- idle for years stays exact (Lua numbers are doubles) and simply reads as
-- full. Monotone in `at`, which is what makes retry_after_ms trustworthy.
local function level(b, p, at)
  local stored = b.stored
  if not stored or stored >= p.max then
    return p.max
  end
  local elapsed = at - b.since
  if elapsed <= 0 then
    return stored
  end
  if elapsed >= (p.max - stored) * 1000000 / p.rate then
    return p.max
  end
  local t = stored + elapsed * p.rate / 1000000
  if t > p.max then
    return p.max
  end
  return t
end

local function until_full(p, tokens)
  if tokens >= p.max then
    return 0
  end
  return math.min(math.ceil((p.max - tokens) * 1000 / p.rate), FOREVER_MS)
end

-- Tokens in millionths of a permit, capped where doubles stop being whole
-- numbers (2^53), so the reply stays an exact integer.
local function micro(t)
  local m = math.floor(t * 1000000)
  if m > 9007199254740992 then
    return 9007199254740992
  end
  return m
end

-- Milliseconds until bucket b (holding `tokens` now) holds `want`, rounded
-- up. The wait is computed, then checked against the very function the next
-- decision will use, so a client that waits retry_after_ms is admitted
-- (barring others taking the tokens first).
local function retry_after(b, p, tokens, want)
  local wait = math.ceil((want - tokens) * 1000000 / p.rate)
  local step = 1
  while level(b, p, now + wait) < want do
    -- growing steps: past 2^53 us (285 years) wait + 1 == wait, and +1
    -- steps would spin forever, holding Redis
    wait = wait + step
    step = step * 2
  end
  return math.min(math.ceil(wait / 1000), FOREVER_MS)
end

-- Writes bucket b's state: `tokens` now (or deletes it when full).
local function save(b, p, tokens)
  local ttl = until_full(p, tokens)
  if ttl > 0 then
    redis.call('SET', b.key, string.format('%.17g %d', tokens, now), 'PX', ttl)
  elseif b.orig_stored then
    redis.call('DEL', b.key)
  end
end

-- The status of an item before any bucket is read: nil when it may be
-- decided, else a negated Connect code.
local function refusal(p, app, want)
  if p.status then
    return p.status
  end
  if not admits(p, app) then
    return -7
  end
  if want > p.max then
    return -11
  end
  return nil
end

-- One item (Acquire, Peek): the decision of the loop below without its
-- bookkeeping for many items, since it is nearly every call.
if n == 1 and mode ~= 'all' then
  local p = policy(KEYS[1])
  local want = tonumber(ARGV[3])
  local status = refusal(p, ARGV[2], want)
  if status then
    return {status, 0, 0, p.max or 0, 0, 0, 0, 0}
  end
  local b = bucket(KEYS[2])
  local tokens = level(b, p, now)
  if mode == 'peek' then
    return {0, 1, math.floor(tokens), p.max, 0, until_full(p, tokens), p.window, micro(tokens)}
  end
  if tokens >= want then
    tokens = tokens - want
    b.stored, b.since = tokens, now
    save(b, p, tokens)
    return {0, 1, math.floor(tokens), p.max, 0, until_full(p, tokens), p.window, micro(tokens)}
  end
  if b.skewed then
    save(b, p, tokens)
  end
  return {0, 0, math.floor(tokens), p.max, retry_after(b, p, tokens, want),
          until_full(p, tokens), p.window, micro(tokens)}
end

local out = {}
local item_bucket = {}  -- per decided item: its bucket (whose .p is its policy)
local refused = false   -- some item of an "all" call was not granted
local longest = 0       -- the longest retry_after_ms among them

for i = 1, n do
  local p = policy(KEYS[2 * i - 1])
  local app, want = ARGV[2 * i], tonumber(ARGV[2 * i + 1])
  local o = 8 * (i - 1)
  local status = refusal(p, app, want)
  if status then
    out[o + 1], out[o + 2], out[o + 3], out[o + 4] = status, 0, 0, p.max or 0
    out[o + 5], out[o + 6], out[o + 7], out[o + 8] = 0, 0, 0, 0
    refused = true
  else
    local b = bucket(KEYS[2 * i])
    local tokens = level(b, p, now)
    if not b.before then
      b.before, b.p = tokens, p   -- as it stood before this call took anything
    end
    item_bucket[i] = b
    if mode == 'peek' then
      out[o + 1], out[o + 2], out[o + 3], out[o + 4] = 0, 1, math.floor(tokens), p.max
      out[o + 5], out[o + 6] = 0, until_full(p, tokens)
    elseif tokens >= want then
      tokens = tokens - want
      b.stored, b.since, b.taken = tokens, now, true
      out[o + 1], out[o + 2], out[o + 3], out[o + 4] = 0, 1, math.floor(tokens), p.max
      out[o + 5], out[o + 6] = 0, until_full(p, tokens)
    else
      -- Denied: nothing is taken.
      local retry = retry_after(b, p, tokens, want)
      if retry > longest then
        longest = retry
      end
      refused = true
      out[o + 1], out[o + 2], out[o + 3], out[o + 4] = 0, 0, math.floor(tokens), p.max
      out[o + 5], out[o + 6] = retry, until_full(p, tokens)
    end
    out[o + 7], out[o + 8] = p.window, micro(tokens)
  end
end

if mode == 'all' and refused then
  -- Nothing is granted: every item answers with its bucket as it stood,
  -- and the wait after which the whole batch could pass.
  for i = 1, n do
    local b = item_bucket[i]
    if b then
      local o = 8 * (i - 1)
      out[o + 2], out[o + 3] = 0, math.floor(b.before)
      out[o + 5], out[o + 6] = longest, until_full(b.p, b.before)
      out[o + 8] = micro(b.before)
    end
  end
  for _, b in pairs(buckets) do
    b.taken, b.stored, b.since = false, b.orig_stored, b.orig_since
  end
end

-- Each bucket is written once, with its final state.
if mode ~= 'peek' then
  for _, b in pairs(buckets) do
    if b.taken or b.skewed then
      save(b, b.p, level(b, b.p, now))
    end
  end
end

return out
