--[[
bucket.lua - one token-bucket decision, atomically, inside Redis.

KEYS[1]  the policy hash   <prefix>{<policy>}:policy
KEYS[2]  the bucket state  <prefix>{<policy>}:b  or  <prefix>{<policy>}:k:<key>
ARGV[1]  the calling app
ARGV[2]  permits wanted (>= 1)
ARGV[3]  "1" to take them (Acquire), "0" to only look (Peek)

Returns {status, allowed, remaining, limit, retry_after_ms, reset_after_ms,
window_s, tokens_micro}: window_s is the seconds an empty bucket takes to
fill (the `w` of the RateLimit-Policy header), tokens_micro the tokens left
in millionths of a permit (for the admin UI's gauge).

ARGV[1] = "*" skips the apps check: only permitd itself sends it (the admin
bucket inspector); a request's app can never be "*" (server/policy.c).
status is 0 or a negated Connect code (server/status.h): -5 not_found,
-7 permission_denied, -9 failed_precondition (policy disabled),
-11 out_of_range (more permits than the bucket holds), -13 internal (a
policy hash that is not a valid policy).

The bucket keeps sub-permit precision: its state is one string
"<tokens> <t>" where tokens is a double written with 17 significant digits
(so it reads back bit for bit) and t the Redis time in microseconds when
tokens was measured. Nothing is rounded on the way, so no fraction of a
permit is ever lost, and a rate such as 1/min accrues exactly one permit
per minute. The clock is Redis TIME: no client clock is trusted.

A full bucket has no state key: every write sets the key to expire when
the bucket would be full again, and a missing key reads as full. A denied
request (and every Peek) writes nothing, save that a denial re-stamps a
state stamped ahead of the Redis clock (the clock stepped back).
]]

local policy = redis.call('HMGET', KEYS[1], 'max_permits', 'rate', 'apps', 'enabled')
if not policy[1] then
  return {-5}
end
local max, rate, apps = tonumber(policy[1]), tonumber(policy[2]), policy[3]
if not max or not rate or max < 1 or rate <= 0 or rate ~= rate or not apps then
  return {-13}
end
if policy[4] == '0' then
  return {-9, 0, 0, max}
end

-- Exact set membership: apps is a comma-separated list of names that cannot
-- themselves hold a comma; a plain find (no patterns) on ",a,b," for ",app,".
if apps ~= '*' and ARGV[1] ~= '*' then
  local set = ',' .. apps .. ','
  if not string.find(set, ',' .. ARGV[1] .. ',', 1, true)
     and not string.find(set, ',*,', 1, true) then
    return {-7, 0, 0, max}
  end
end

local want = tonumber(ARGV[2])
if want > max then
  return {-11, 0, 0, max}
end

local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000000 + tonumber(clock[2])

local stored, since = max, now
local state = redis.call('GET', KEYS[2])
if state then
  local sp = string.find(state, ' ', 1, true)
  stored = tonumber(string.sub(state, 1, sp - 1))
  since = tonumber(string.sub(state, sp + 1))
end
-- Redis TIME can step back (failover to a replica, NTP). A state stamped
-- ahead of the clock counts as measured now: otherwise the bucket would stay
-- frozen until the clock caught up, and the wait search below would crawl
-- there one microsecond per step (minutes of a blocked Redis per hour of skew).
-- A denial re-stamps such a state (below), or it would never start accruing.
local skewed = since > now
if skewed then
  since = now
end

-- Tokens in the bucket at time `at`. The elapsed time is capped at the time
-- the bucket takes to fill before it is multiplied, so a bucket idle for years
-- stays exact (Lua numbers are doubles) and simply reads as full. Monotone
-- in `at`, which is what makes retry_after_ms trustworthy below.
local function level(at)
  if stored >= max then
    return max
  end
  local elapsed = at - since
  if elapsed <= 0 then
    return stored
  end
  if elapsed >= (max - stored) * 1000000 / rate then
    return max
  end
  local t = stored + elapsed * rate / 1000000
  if t > max then
    return max
  end
  return t
end

-- Milliseconds until a bucket holding `tokens` is full again, rounded up,
-- capped at FOREVER_MS (3170 years): past 1e14 a number no longer reaches
-- Redis as an integer (PX gets "1e+14"; replies overflow near 1e19).
local FOREVER_MS = 99999999999999

-- Tokens in millionths of a permit, capped where doubles stop being whole
-- numbers (2^53), so the reply stays an exact integer.
local function micro(t)
  local m = math.floor(t * 1000000)
  if m > 9007199254740992 then
    return 9007199254740992
  end
  return m
end
local function until_full(tokens)
  if tokens >= max then
    return 0
  end
  return math.min(math.ceil((max - tokens) * 1000 / rate), FOREVER_MS)
end

local tokens = level(now)
local window = math.min(math.ceil(max / rate), FOREVER_MS)

if ARGV[3] == '0' then
  return {0, 1, math.floor(tokens), max, 0, until_full(tokens), window,
          micro(tokens)}
end

if tokens >= want then
  tokens = tokens - want
  local ttl = until_full(tokens)
  if ttl > 0 then
    redis.call('SET', KEYS[2], string.format('%.17g %d', tokens, now), 'PX', ttl)
  end
  return {0, 1, math.floor(tokens), max, 0, ttl, window, micro(tokens)}
end

-- Denied: nothing is taken (and nothing written but a skewed state's new
-- stamp, see `skewed`). The wait is computed, then checked against the
-- very function the next decision will use, so a client that waits
-- retry_after_ms is admitted (barring other clients taking the tokens first).
local wait = math.ceil((want - tokens) * 1000000 / rate)
local step = 1
while level(now + wait) < want do
  -- growing steps: past 2^53 us (285 years) wait + 1 == wait, and +1 steps
  -- would spin forever, holding Redis
  wait = wait + step
  step = step * 2
end
if skewed then
  redis.call('SET', KEYS[2], string.format('%.17g %d', tokens, now), 'PX', until_full(tokens))
end
return {0, 0, math.floor(tokens), max, math.min(math.ceil(wait / 1000), FOREVER_MS),
        until_full(tokens), window, micro(tokens)}
