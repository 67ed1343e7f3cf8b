--[[
bucket.lua - token-bucket decisions, atomically, inside Redis.

One call decides one or more items in order. Its keys are bucket state keys
only (server/stores/policy.c lays them out); the policies' limits come in
ARGV, from permitd's in-memory copy of each policy
(server/decisions/policies.c): this script reads no policy hash, so a keyed
bucket may live in a slot of its own.
  KEYS[i]     item i's bucket state, for i = 1..m (m = #KEYS: all of one
              Redis Cluster slot)
  ARGV[1]     "take" (Acquire), "peek" (Peek: nothing taken), "all"
              (all or nothing: every item is granted, or none takes anything),
              or "settle" (see the settle section below); the other
              algorithms' scripts also know "release" and "renew"
              (concurrency)
  ARGV[2]     np, the number of policies whose limits follow
  ARGV[3]     how long (ms) a take's answer is kept for its request id;
              "" when no item of the call carries a request id or a lease
              id: the compact call (nearly every call: permitd's
              call_head()), 2 ARGV an item and a short RECORD (below)
  ARGV[4+4(j-1)..7+4(j-1)]  policy j: its version stamp, max_permits, p1,
              p2. For this script p1 is the rate and p2 the rate history
              `rates` ("" when none; see below). The other algorithms
              (lua/<algorithm>.lua, issue 20) take the same call with:
                fixed_window    window_ms, calendar ("" | minute | hour |
                                day | month: windows aligned in UTC)
                sliding_window  window_ms, ""
                sliding_log     window_ms, ""
                concurrency     lease_ms,  ""
  ARGV[b+w(i-1) .. b+w(i-1)+w-1]  with b = 4 + 4 np and w = 4 (2 in a
              compact call): item i's policy (j, 1..np), its permits
              (>= 1), then, when w = 4, its request id ("" none) and its
              lease id ("" none; concurrency only: the new lease's id on a
              take, 32 lowercase hex characters permitd drew from
              getrandom(), the lease to act on for release and renew)
  ARGV[b+wn+(i-m-1)]  for i = m+1..n: item i's bucket state key, when the
              items' keys span several slots of one Redis Cluster master
              (then m = 1; n = (#ARGV - b + 1 + m) / (w + 1), which is m
              when no key follows the items)

Over several slots (issue 19): permitd sends a pass's Acquires and Peeks
as one call per master, not per slot. What Redis 7.0.15 does with such a
call, measured on the test stack's cluster (3 masters):
  - the declared KEYS must share one slot, shebang or not: EVALSHA with
    keys of two slots, both served by the node asked, answers "CROSSSLOT
    Keys in request don't hash to the same slot" before the script runs.
    Hence one declared key (it routes the call: a slot the node does not
    serve answers MOVED or ASK as for any call) and the others in ARGV;
  - a key in ARGV of another slot of the same node is served: a script
    without a `#!lua` line may touch such keys (Redis keeps the old
    behaviour of scripts without flags). This script has no such line on
    purpose: with one, Redis takes a script that does not declare
    no-writes for a writing one and refuses it on a read-only replica,
    and a Peek, which writes nothing, is served by a replica during a
    failover (test_redis.py, test_faults.py); the flag
    allow-cross-slot-keys would only say what is already allowed;
  - each command inside must still touch one slot: an MGET of keys of two
    slots fails, hence one GET per key in such a call;
  - a key of a slot the node does not serve (another master's, or one
    being migrated and not here, or one being imported without ASKING)
    raises "ERR Script attempted to access a non local key in a cluster
    node" at the command that touches it: an error, not MOVED, and what
    the script wrote before it stays written. So every key is read before
    any is written: such a call then writes nothing, and permitd sends its
    items again, one call per slot (server/stores/redis_pipe.c,
    server/decisions/limiter.c), whose redirects are followed as usual.
  - all_or_nothing ("all") keeps its one-slot rule (limiter.c).
permitd checks everything else before the call: the policy exists and is
enabled, the app is in its `apps` (exact set membership, in C), the key is
well formed, the limits are valid (max_permits >= 1, rate > 0).

Answers one RECORD of 112 bytes per item, in order, as one string (the
layout every decision script of permitd answers): ten little-endian
doubles, struct.pack('<dddddddddd', status, allowed, remaining, limit,
retry_after_ms, reset_after_ms, window_s, level_micro, lease_expires_ms,
flags), then the 32 bytes of a lease id (32 "\0" bytes when none: always,
for a token bucket). A compact call's RECORD is its first 8 numbers
alone (64 bytes: lease_expires_ms and flags are 0 in a call without
request ids or lease ids, and so is the lease id): the two empty ARGV an
item and the 48 bytes an item fewer save Redis 1% of a lone Acquire, 4%
at nine a call, 10% of a batch's item (tests/bench/RESULTS-redis-cost.md). Every number is
whole, and exact below 2^53, where every policy permitd accepts stays;
server/stores/redis.c reads them (redis_answer_records(), the length by
the number of items asked). Answered as a table of integers they would cost
Redis ~650 instructions each and permitd a parse each. Reading no policy
hash, a lone Acquire cost Redis 79.9k instructions, 93.8k when it read one
(tests/bench/redis-cost.sh, issue 19).
status is 0 or a negated Connect code (server/core/status.h): -10
aborted ("all": another item was refused), -11 out_of_range (more permits
than the bucket holds; in "all", the items of one bucket together:
`remaining` is their total), -13 internal (a rate history that is not one
lua/sync.lua wrote), -15 data_loss (the bucket's state key holds a value
this script did not write; `remaining` is its size in bytes); or -17,
"stale", which is no Connect code: the bucket was last written under a
newer version of its policy than the one in ARGV (`remaining` is that
version stamp). Nothing is written for a stale item (in "all", for any
item); permitd reloads the policy from Redis and sends the call again, once,
so no bucket is ever decided under an older version than one it was
decided under. window_s is the seconds an empty bucket takes to fill (the
`w` of the RateLimit-Policy header), level_micro the tokens left in
millionths of a permit (for the admin UI's gauge), lease_expires_ms 0 (a
token bucket holds no leases). flags: bit 1 (1) replayed: the answer of an
earlier take with the same request id, nothing taken now; bit 2 (2) no-op
(a release or renew of a lease not held: concurrency only).

Request ids (issue 20, every decision script alike): on "take" and "all",
an item with a request id whose record key exists answers the RECORD kept
there with flags |= 1 and takes nothing (in "all" it is left out of the
batch's decision: the first call decided it); otherwise, once decided, its
RECORD (allowed or denied alike: "a retry answers what the first call
answered") is kept under the record key for ARGV[3] ms. The record key is
the item's state key .. "\x1f" .. "r" .. request id: no bucket key holds a
control character, so it meets no other key, and it shares the state key's
hash tag, so its slot. A record is 112 bytes of value. Only a status 0
answer is kept (an error is no answer to repeat: a stale item is asked
again). A "peek" ignores request ids.

The version stamp of a policy is id * 2^24 + version (id: its MySQL row
id, 0 for a policy kept by hand; version: the hash's `version`, which every
edit raises): a policy deleted and created again under the same name has a
new id, so its buckets are not "newer" than it. permitd computes it.

The bucket keeps sub-permit precision: its state is one 24-byte string,
three little-endian IEEE doubles (struct format '<ddd'): the tokens, the
Redis time in microseconds when they were measured (whole, and exact: 2^53
us is 285 years), and the version stamp of the policy it was last written
under. The bits go in and come back as they were, so no fraction of a
permit is ever lost, and a rate such as 1/min accrues exactly one permit
per minute. A 16-byte state (tokens and time: what permitd wrote before
issue 19) reads as written under version stamp 0. 24 bytes keep the value
one 48-byte embedded-string allocation in Redis, as 16 were. The clock is
Redis TIME: no client clock is trusted.

A rate edit re-prices nothing already earned: tokens accrue at the old
rate up to the edit and at the new one after it. lua/sync.lua, which writes
every policy, stamps an edit of `rate` with Redis TIME and keeps the rates
before the recent edits in the policy hash's field `rates`, newest first:
  rates = "<t1>:<rate before t1>;<t2>:<rate before t2>;..."  (t1 > t2 > ...)
t in Redis microseconds, each rate as the hash held it. permitd passes the
field along with the limits it belongs to. A bucket stamped
before t1 is first brought to t1 edit by edit (fold(): from its stamp to
t_k at the rate before t_k, ..., to t1 at the rate before t1), then accrues
at `rate` from t1: exact from the moment the edit is in force, on every
instance, whatever the settle pass below has or has not done yet. A bucket
stamped at or after t1 (every bucket written since the edit) costs one
number read off the front of `rates`; a policy whose history is empty
sends "" and costs nothing. Every segment is capped at the policy's
max_permits as it is now (a lowered max clamps; a bucket that reached the
old max before a raise held no key, and a missing key reads as the new
max): the history is one of rates only. It stays short: sync.lua drops an
entry once an empty bucket stamped before it would be full by now (no
bucket written before it can still be below full, and a full bucket has no
key), and once the settle pass has folded every bucket to now it drops
every entry up to the newest it saw (sync.c).

A full bucket has no state key: every write sets the key to expire when
the bucket would be full again, and a missing key reads as full. A denied
request (and every Peek) writes nothing, save that a denial re-stamps a
state stamped ahead of the Redis clock (the clock stepped back). Items of
one call that share a bucket see each other's takes, as if sent one after
the other; each bucket is written once, at the end, under the version
stamp of the call.
]]

local mode = ARGV[1]
if mode ~= 'take' and mode ~= 'peek' and mode ~= 'all' and mode ~= 'settle' then
  -- never decided as a take (permitd sends no other; redis-cli might)
  return redis.error_reply('bucket.lua: mode "' .. tostring(mode) ..
                           '" is not one of take, peek, all, settle')
end
local n = #KEYS
local np = tonumber(ARGV[2])
local ridttl = ARGV[3]  -- how long a take's answer is kept for its request id (ms)
local per = ridttl == '' and 2 or 4  -- ARGV an item: "" = compact (see the top)
local base = 4 + 4 * np  -- ARGV index of item 1's policy
local keys = KEYS
if mode ~= 'settle' and #ARGV - base + 1 > per * n then
  -- keys of several slots (see the top): the ones after KEYS follow the items
  local m = n
  n = (#ARGV - base + 1 + m) / (per + 1)
  keys = {}
  for i = 1, m do
    keys[i] = KEYS[i]
  end
  for i = m + 1, n do
    keys[i] = ARGV[base + per * n + i - m - 1]
  end
end
local find, sub, gmatch = string.find, string.sub, string.gmatch
local floor, ceil = math.floor, math.ceil
local pack, unpack_state = struct.pack, struct.unpack
local STATE = '<ddd'
local STALE = -17
-- One item's RECORD: 10 numbers, then its lease id, which a token bucket
-- never has (NOLEASE: a constant of the chunk, not built per call); in a
-- compact call the first 8 numbers alone (struct.pack ignores the rest).
local ANSWER = per == 4 and '<ddddddddddc32' or '<dddddddd'
local NOLEASE = '\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0'
local REPLAYED = 1            -- flags bit: an earlier take's answer

local clock = redis.call('TIME')
local now = clock[1] * 1000000 + clock[2]

-- Milliseconds are capped at FOREVER_MS (3170 years): past 1e14 a number no
-- longer reaches Redis as an integer (PX gets "1e+14"; replies overflow).
local FOREVER_MS = 99999999999999

-- The single-item path (Acquire and Peek: nearly every call) is written out
-- in line, before the helpers of the many-item path: in Redis every call
-- runs the whole chunk, so each `local function` above the return is a
-- closure built on every call. Measured with redis-benchmark (100k keys,
-- three rounds each): through ten helpers 7.84 us per call, in line 7.37.
-- Its formulas are those of level(), until_full(), window() and micro()
-- below, which the many-item path uses; change them together.
--
-- Its common case comes first, before any helper is built: a take that is
-- granted, or a peek, of a bucket that is full (no key) or holds a 24-byte
-- state of this version or older, stamped no later than now, that needs
-- no folding across rate edits. Building the five helpers below (state()
-- to retry_after()) cost a lone Acquire 9.9k of its 86.8k instructions
-- (tests/bench/redis-cost.sh). Every other single item (a denial, a rate
-- history to fold, a clock that stepped back, a state of another version
-- or shape) goes on after them, to the rest of the path.
local lone = n == 1 and (mode == 'take' or mode == 'peek')
local ver, max, rate, rates, want, rkey, s     -- the lone item's (read once)
if lone then
  ver, max, rate, rates = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6]), ARGV[7]
  want = tonumber(ARGV[base + 1])
  -- record_key() and replay() below, in line (see above)
  local rid = per == 4 and ARGV[base + 2]
  rkey = mode == 'take' and rid and rid ~= '' and KEYS[1] .. '\31r' .. rid
  if rkey then
    local rec = redis.call('GET', rkey)
    if rec then
      local flags = unpack_state('<d', rec, 73)
      if flags % 2 == 0 then
        flags = flags + REPLAYED
      end
      return sub(rec, 1, 72) .. pack('<d', flags) .. sub(rec, 81)
    end
  end
  if want > max then
    return pack(ANSWER, -11, 0, 0, max, 0, 0, 0, 0, 0, 0, NOLEASE)
  end
  s = redis.call('GET', KEYS[1])
  local tokens, since, written = max, now, ver
  if s and #s == 24 then
    tokens, since, written = unpack_state(STATE, s)
  end
  if (not s or #s == 24) and written <= ver and since <= now and (rates == '' or tokens >= max) then
    if tokens < max then            -- level(), in line
      local elapsed = now - since
      if elapsed >= (max - tokens) * 1000000 / rate then
        tokens = max
      elseif elapsed > 0 then
        tokens = tokens + elapsed * rate / 1000000
        if tokens > max then
          tokens = max
        end
      end
    elseif tokens > max then
      tokens = max
    end
    if mode == 'peek' or tokens >= want then
      if mode == 'take' then
        tokens = tokens - want
      end
      local ttl = 0                 -- until_full()
      if tokens < max then
        ttl = ceil((max - tokens) * 1000 / rate)
        if ttl > FOREVER_MS then
          ttl = FOREVER_MS
        end
      end
      if mode == 'take' and ttl > 0 then    -- save()
        redis.call('SET', KEYS[1], pack(STATE, tokens, now, ver), 'PX', ttl)
      elseif mode == 'take' and s then
        redis.call('DEL', KEYS[1])
      end
      local w = ceil(max / rate)    -- window()
      if w > FOREVER_MS then
        w = FOREVER_MS
      end
      local m = floor(tokens * 1000000) -- micro()
      if m > 9007199254740992 then
        m = 9007199254740992
      end
      local rec = pack(ANSWER, 0, 1, floor(tokens), max, 0, ttl, w, m, 0, 0, NOLEASE)
      if rkey then
        redis.call('SET', rkey, rec, 'PX', ridttl)
      end
      return rec
    end
  end
end

-- What both the rest of the single-item path and the many-item path need:
-- state(), level(), retry_after().

-- The tokens, their time and the version stamp they were written under in
-- state s, or nil and its size when s is not a state this script wrote.
-- Such an item answers -15 and its key is left as it is for the operator:
-- guessing would grant or refuse on garbage. It fails no other item of the
-- call (permitd sends the Acquires of one policy that arrive together as
-- one call). A 16-byte state is one written before version stamps (see the
-- top): stamp 0.
local function state(s)
  local len = #s
  if len == 24 then
    local tokens, since, ver = unpack_state(STATE, s)
    return tokens, since, ver
  elseif len == 16 then
    local tokens, since = unpack_state('<dd', s)
    return tokens, since, 0
  end
  return nil, len
end

-- The time of the newest rate edit in a policy's `rates` (see the top), or
-- nil when the field does not start with one.
local function newest(rates)
  local c = find(rates, ':', 1, true)
  return c and tonumber(sub(rates, 1, c - 1))
end

-- A bucket that held `stored` (< max) at `since`, brought to the newest
-- edit in `rates` (which is later than since): its tokens then, and that
-- time. Each segment accrues at the rate in force in it, capped at max as
-- level() caps: elapsed time is compared with the time to fill before it is
-- multiplied. Deterministic in (stored, since, rates), so every decision
-- that reads the same state folds it to the same bits, and level() carries
-- on from there at the policy's rate. nil when `rates` is not a history
-- sync.lua wrote (the item answers internal).
local function fold(stored, since, max, rates)
  local ts, rs, n = {}, {}, 0
  for t, r in gmatch(rates, '([^:;]+):([^;]*)') do
    n = n + 1
    ts[n], rs[n] = tonumber(t), tonumber(r)
    if not ts[n] or not rs[n] or rs[n] <= 0 or rs[n] ~= rs[n] or (n > 1 and ts[n] >= ts[n - 1]) then
      return nil
    end
  end
  if n == 0 then
    return nil
  end
  local x = stored
  for i = n, 1, -1 do
    local t = ts[i]
    if t > since then
      local r = rs[i]
      if x >= max or t - since >= (max - x) * 1000000 / r then
        return max, ts[1]
      end
      x = x + (t - since) * r / 1000000
      if x >= max then
        return max, ts[1]
      end
      since = t
    end
  end
  return x, since
end

-- Tokens at time `at` of a bucket that held `stored` at `since` (nil: full).
-- The elapsed time is capped at the time the bucket takes to fill before it
-- is multiplied, so a bucket idle for years stays exact (Lua numbers are
-- doubles) and simply reads as full. Monotone in `at`, which is what makes
-- retry_after_ms trustworthy.
local function level(stored, since, max, rate, at)
  if not stored or stored >= max then
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

-- Milliseconds until a bucket that held `stored` at `since` (holding
-- `tokens` now) holds `want`, rounded up. The wait is computed, then checked
-- against the very function the next decision will use, so a client that
-- waits retry_after_ms is admitted (barring others taking the tokens first).
local function retry_after(stored, since, max, rate, tokens, want)
  local wait = ceil((want - tokens) * 1000000 / rate)
  local step = 1
  while level(stored, since, max, rate, now + wait) < want do
    -- growing steps: past 2^53 us (285 years) wait + 1 == wait, and +1
    -- steps would spin forever, holding Redis
    wait = wait + step
    step = step * 2
  end
  local ms = ceil(wait / 1000)
  if ms > FOREVER_MS then
    return FOREVER_MS
  end
  return ms
end

-- The rest of the single-item path (its common case is above: its
-- arguments, request id and state are read there).
if lone then
  local stored, since, skewed
  if s then
    local written
    stored, since, written = state(s)
    if not stored then
      return pack(ANSWER, -15, 0, since, max, 0, 0, 0, 0, 0, 0, NOLEASE)
    elseif written > ver then
      return pack(ANSWER, STALE, 0, written, max, 0, 0, 0, 0, 0, 0, NOLEASE)
    end
    if rates ~= '' and stored < max then  -- idle across rate edits: see the top
      local top = newest(rates)
      if not top or since < top then
        stored, since = fold(stored, since, max, rates)
        if not stored then
          return pack(ANSWER, -13, 0, 0, 0, 0, 0, 0, 0, 0, 0, NOLEASE)
        end
      end
    end
    if since > now then
      since, skewed = now, true     -- see bucket()
    end
  end
  local tokens = level(stored, since, max, rate, now)
  local retry, write = 0, false
  if mode == 'take' and tokens >= want then
    tokens, write = tokens - want, true
  elseif mode == 'take' then
    -- Denied: nothing is taken (a state from the future is re-stamped).
    retry, write = retry_after(stored, since, max, rate, tokens, want), skewed
  end
  local ttl = 0                     -- until_full()
  if tokens < max then
    ttl = ceil((max - tokens) * 1000 / rate)
    if ttl > FOREVER_MS then
      ttl = FOREVER_MS
    end
  end
  if write and ttl > 0 then         -- save()
    redis.call('SET', KEYS[1], pack(STATE, tokens, now, ver), 'PX', ttl)
  elseif write and s then
    redis.call('DEL', KEYS[1])
  end
  local w = ceil(max / rate)        -- window()
  if w > FOREVER_MS then
    w = FOREVER_MS
  end
  local m = floor(tokens * 1000000) -- micro()
  if m > 9007199254740992 then
    m = 9007199254740992
  end
  local rec = pack(ANSWER, 0, retry == 0 and 1 or 0, floor(tokens), max, retry, ttl, w, m, 0, 0, NOLEASE)
  if rkey then
    redis.call('SET', rkey, rec, 'PX', ridttl)
  end
  return rec
end

-- The many-item path's helpers.

-- The request-id helpers, built only in a call that carries a request id
-- (`any` below: a closure built on every call costs every call):
-- record_key(i, key), the record key of item i's request id, or false
-- when it has none or the mode keeps none (see the top); replay(rec), a
-- kept RECORD answered again, flags |= REPLAYED.
local record_key, replay

-- A state (stored, since) of a policy whose rate history is `rates` (false:
-- none), brought to its newest edit when it predates it (fold()); nil when
-- the history is not one sync.lua wrote.
local function refold(stored, since, max, rates)
  if rates and stored < max then
    local top = newest(rates)
    if not top or since < top then
      return fold(stored, since, max, rates)
    end
  end
  return stored, since
end

local function until_full(max, rate, tokens)
  if tokens >= max then
    return 0
  end
  local ms = ceil((max - tokens) * 1000 / rate)
  if ms > FOREVER_MS then
    return FOREVER_MS
  end
  return ms
end

-- The seconds an empty bucket takes to fill.
local function window(max, rate)
  local s = ceil(max / rate)
  if s > FOREVER_MS then
    return FOREVER_MS
  end
  return s
end

-- Tokens in millionths of a permit, capped where doubles stop being whole
-- numbers (2^53), so the reply stays an exact integer.
local function micro(t)
  local m = floor(t * 1000000)
  if m > 9007199254740992 then
    return 9007199254740992
  end
  return m
end

-- settle: the policy's max_permits or rate was edited (lua/sync.lua tells
-- permitd, which scans for the policy's buckets and sends them here, a page
-- at a time: KEYS the buckets, ARGV[2..7] "1", the request-id ttl (unused)
-- and the policy's limits as for items, no items). A bucket's key was set to
-- expire when it would be full under the limits of its last write; under
-- slower ones (a lower rate, a higher max) that is too soon, and a missing
-- key reads as full. Each bucket named is set to expire when it would be
-- full under the policy's limits now, its key removed when it is full
-- already; its state stays as it is, save that a state stamped before the
-- newest rate edit is rewritten as of now (its tokens folded across the
-- edits: the same number a decision would read). A bucket written under a
-- newer version than ARGV's is left as it is (its writer had newer limits).
-- Answers {buckets set, keys removed}.
if mode == 'settle' then
  local ver, max, rate, rates = tonumber(ARGV[4]), tonumber(ARGV[5]),
                                tonumber(ARGV[6]), ARGV[7]
  if rates == '' then
    rates = false
  end
  if not max or not rate or max < 1 or rate <= 0 or rate ~= rate then
    return pack('<dd', 0, 0)
  end
  local states = redis.call('MGET', unpack(KEYS))
  local set, removed = 0, 0
  for i = 1, n do
    local stored, since, written = false, 0, 0
    if states[i] then
      stored, since, written = state(states[i])
    end
    -- A bucket stamped before the newest rate edit is written as of now,
    -- its tokens folded across the edits (then no bucket is stamped before
    -- that edit, and sync.c has sync.lua "trim" the history up to it); a
    -- history that is not sync.lua's leaves the key as it is.
    local tokens, at = nil, since
    if stored and written <= ver then
      tokens, at = refold(stored, since, max, rates)
    end
    if tokens then
      local moved = at ~= since
      if at > now then
        at = now
      end
      tokens = level(tokens, at, max, rate, now)
      local ttl = until_full(max, rate, tokens)
      if ttl > 0 and moved then
        redis.call('SET', KEYS[i], pack(STATE, tokens, now, ver), 'PX', ttl)
        set = set + 1
      elseif ttl > 0 then
        redis.call('PEXPIRE', KEYS[i], ttl)
        set = set + 1
      else
        redis.call('DEL', KEYS[i])
        removed = removed + 1
      end
    end
  end
  return pack('<dd', set, removed)
end

-- Many items: each policy's limits are read once per call and shared by
-- the items that name it, and so are buckets; every bucket's state comes
-- in one MGET.
local policies, buckets = {}, {}
local written = {}      -- the buckets in the order first read: they are written in it
local states
if keys == KEYS then
  states = redis.call('MGET', unpack(KEYS))
else
  -- one slot per command; every key read before any is written (the top)
  states = {}
  for i = 1, n do
    states[i] = redis.call('GET', keys[i])
  end
end
-- The items' request-id records, read with the states (before any write).
-- Most calls carry none: then no item is looked up (a request id costs
-- only the calls that carry one; an item without reads nil: none).
local rkeys, replayed = {}, {}
local any = false
if mode ~= 'peek' and per == 4 then
  for i = 1, n do
    if ARGV[base + 4 * (i - 1) + 2] ~= '' then
      any = true
      break
    end
  end
end
if any then
  record_key = function(i, key)
    local rid = per == 4 and ARGV[base + 4 * (i - 1) + 2]
    if (mode ~= 'take' and mode ~= 'all') or not rid or rid == '' then
      return false
    end
    return key .. '\31r' .. rid
  end
  replay = function(rec)
    local flags = unpack_state('<d', rec, 73)
    if flags % 2 == 0 then
      flags = flags + REPLAYED
    end
    return sub(rec, 1, 72) .. pack('<d', flags) .. sub(rec, 81)
  end
  for i = 1, n do
    rkeys[i] = record_key(i, keys[i])
    replayed[i] = rkeys[i] and redis.call('GET', rkeys[i])
  end
end

local function policy(j)
  local p = policies[j]
  if not p then
    local at = 4 + 4 * (j - 1)
    local max, rate, rates = tonumber(ARGV[at + 1]), tonumber(ARGV[at + 2]), ARGV[at + 3]
    p = {ver = tonumber(ARGV[at]), max = max, rate = rate, rates = rates ~= '' and rates,
         window = window(max, rate)}
    policies[j] = p
  end
  return p
end

-- Item i's bucket, shared with the items before it that name the same key:
-- {stored, since} is the state the next decision will read (after this
-- call's takes), orig_* what the key held before (brought to policy p's
-- newest rate edit when stamped before it: see the top); {foreign = size}
-- when the key holds what this script did not write (see state()),
-- {broken = true} when p's rate history is not one sync.lua wrote,
-- {stale = stamp} when it was written under a newer version than p's.
--
-- Redis TIME can step back (failover to a replica, NTP): a state stamped
-- ahead of the clock counts as measured now, else the bucket would stay
-- frozen until the clock caught up; `skewed` says so, and a denial
-- re-stamps such a state, or it would never start accruing.
local function bucket(i, p)
  local k = keys[i]
  local b = buckets[k]
  if not b then
    local s = states[i]
    local stored, since, skewed, ver
    if s then
      stored, since, ver = state(s)
      if not stored then
        b = {foreign = since}
        buckets[k] = b
        return b
      elseif ver > p.ver then
        b = {stale = ver}
        buckets[k] = b
        return b
      end
      stored, since = refold(stored, since, p.max, p.rates)   -- see the top
      if not stored then
        b = {broken = true}
        buckets[k] = b
        return b
      end
      if since > now then
        since, skewed = now, true
      end
    end
    -- Every field is named here, so the table is made once at its size.
    b = {key = k, stored = stored, since = since, skewed = skewed or false,
         orig_stored = stored, orig_since = since, before = false, p = false,
         taken = false}
    buckets[k] = b
    written[#written + 1] = b
  end
  return b
end

local out = {}          -- per item: its answer (ANSWER)
local item_bucket = {}  -- per decided item: its bucket (whose .p is its policy)
local refused = false   -- some item of an "all" call was not granted

for i = 1, n do
  local p = policy(tonumber(ARGV[base + per * (i - 1)]))
  local want = tonumber(ARGV[base + per * (i - 1) + 1])
  local status = false
  if replayed[i] then
    -- an earlier take's answer (see the top): decided then, not now
    out[i] = replay(replayed[i])
  elseif want > p.max then
    status = -11
  end
  local b = not status and bucket(i, p)
  if b and b.foreign then
    status = -15
  elseif b and b.stale then
    status = STALE
  elseif b and b.broken then
    status, b = -13, false
  end
  if replayed[i] then
    rkeys[i] = false
  elseif status then
    out[i] = pack(ANSWER, status, 0, b and (b.foreign or b.stale) or 0, p.max, 0, 0, 0, 0, 0, 0, NOLEASE)
    rkeys[i] = false
    refused = true
  else
    local max, rate = p.max, p.rate
    local tokens = level(b.stored, b.since, max, rate, now)
    if not b.before then
      b.before, b.p = tokens, p   -- as it stood before this call took anything
    end
    item_bucket[i] = b
    local allowed, retry = 1, 0
    if mode ~= 'peek' and tokens >= want then
      tokens = tokens - want
      b.stored, b.since, b.taken = tokens, now, true
    elseif mode ~= 'peek' then
      -- Denied: nothing is taken.
      retry = retry_after(b.stored, b.since, max, rate, tokens, want)
      refused = true
      allowed = 0
    end
    out[i] = pack(ANSWER, 0, allowed, floor(tokens), max, retry, until_full(max, rate, tokens),
                  p.window, micro(tokens), 0, 0, NOLEASE)
  end
end

if mode == 'all' and refused then
  -- Nothing is granted. An item refused on its own (an error) aborts the
  -- others. Else the batch passes once every bucket holds what all of its
  -- items ask together: the wait is the longest of the buckets' waits for
  -- their totals (not of the items' own: the first of two takes would pass
  -- sooner than both), and a total beyond the bucket's max_permits can
  -- never pass: its items answer out_of_range, the others aborted.
  local total, errored, never, longest = {}, false, false, 0
  for i = 1, n do
    local b = item_bucket[i]
    if b then
      total[b] = (total[b] or 0) + tonumber(ARGV[base + per * (i - 1) + 1])
    elseif not replayed[i] then
      errored = true
    end
  end
  if not errored then
    for b, want in pairs(total) do
      local p = b.p
      if want > p.max then
        never = true
      elseif b.before < want then
        local wait = retry_after(b.orig_stored, b.orig_since, p.max, p.rate, b.before, want)
        if wait > longest then
          longest = wait
        end
      end
    end
  end
  for i = 1, n do
    local b = item_bucket[i]
    if b then
      local p = b.p
      if errored or (never and total[b] <= p.max) then
        out[i] = pack(ANSWER, -10, 0, 0, p.max, 0, 0, 0, 0, 0, 0, NOLEASE)
        rkeys[i] = false
      elseif never then
        out[i] = pack(ANSWER, -11, 0, total[b], p.max, 0, 0, 0, 0, 0, 0, NOLEASE)
        rkeys[i] = false
      else
        out[i] = pack(ANSWER, 0, 0, floor(b.before), p.max, longest,
                      until_full(p.max, p.rate, b.before), p.window, micro(b.before), 0, 0, NOLEASE)
      end
    end
  end
  for _, b in ipairs(written) do
    b.taken, b.stored, b.since = false, b.orig_stored, b.orig_since
  end
end

-- Each bucket is written once, with its final state, expiring when full; a
-- full bucket is no key. Every bucket written is stamped now (taken from,
-- or re-stamped: skewed), so its tokens need no refill (level()): a state
-- written under a larger max_permits reads as full and is deleted.
if mode ~= 'peek' then
  for _, b in ipairs(written) do
    if b.taken or b.skewed then
      local p, tokens = b.p, b.stored
      local ttl = until_full(p.max, p.rate, tokens)
      if ttl > 0 then
        redis.call('SET', b.key, pack(STATE, tokens, now, p.ver), 'PX', ttl)
      elseif b.orig_stored then
        redis.call('DEL', b.key)
      end
    end
  end
  -- Each answer decided now is kept for its request id (see the top).
  for i = 1, any and n or 0 do
    if rkeys[i] then
      redis.call('SET', rkeys[i], out[i], 'PX', ridttl)
    end
  end
end

return table.concat(out)
