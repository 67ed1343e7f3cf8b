--[[
sync.lua - copy one policy from MySQL into Redis, unless Redis already holds
the same or a newer state of it. Several permitd instances sync at once, each
from its own MySQL snapshot; this check, done atomically here, is what stops
an older snapshot from overwriting a newer one.

KEYS[1]  the policy hash <prefix>{<name>}:policy

This script is the one writer of a policy hash's layout (permitd's own
policies, such as the login throttle's "_login", are written with "set"):
  name, apps, max_permits, enabled, failure_mode, colocate, version, id,
  updated_us, synced_us, rates   as below
  rate        a token bucket's permits a second; absent for the others
  algorithm   (issue 20) absent or "" = token_bucket, else fixed_window,
              sliding_window, sliding_log or concurrency
  window_ms   whole milliseconds of the window; "" when none (a calendar
              window, or an algorithm without one)
  calendar    "" or minute | hour | day | month (a fixed window in UTC)
  lease_ms    a concurrency lease's time-to-live in ms; "" for the others
  shadow      (issue 23) "1": the policy is in shadow mode (decided and
              counted, never refused); absent (or "0"): it enforces
  local_lease (issue 41, migration 0016) "off", "on" or "auto": the
              policy's own local leases; absent: as --local-leases says
  local_lease_permits  the permits its lease takes; absent: as
              --local-lease-permits says
  reserve_ttl_ms, debt_floor, reserve_expiry  (issue 38) a reservation's
              ttl cap in ms, how far below empty a commit may charge,
              "refund" when an expired reservation is refunded; each
              absent at its default (300000, 0, keep)
A token bucket's hash has none of the four algorithm fields: it is exactly
as before issue 20, so a permitd from before reads it unchanged.

ARGV[1] = "put": ARGV[2] the row id, ARGV[3] its version, ARGV[4] the
          snapshot's MySQL time in µs, then field/value pairs (which include
          id, version and updated_us). Redis keeps what it has when
            - its row id is newer (the policy was deleted and created again), or
            - its version is newer, or
            - the versions are equal and its snapshot is as new or newer
              (an app list edited with plain SQL changes no version), or
            - every field already has the offered value, and the hash has
              none of the limits (rate, algorithm, window_ms, calendar,
              lease_ms) nor shadow the offer leaves out (nothing changed).
          Otherwise the hash is replaced and stamped synced_us = ARGV[4].
          Returns {written, limits}: written 1 when written, 0 when Redis
          was already up to date; limits 1 when a token bucket replaced a
          token bucket of another max_permits or rate (permitd then has
          bucket.lua "settle" the policy's buckets: their keys expire on
          the old limits' schedule; the other algorithms' state keys are
          their own, see stores/policy.h, and expire by themselves).

ARGV[1] = "del": ARGV[2] the snapshot's MySQL time in µs, ARGV[3] the
          highest policy id the snapshot knows of (its rows, and the ids
          its audit names: a deleted row's too). The hash is deleted only when
          it was last changed before the snapshot and its row is not newer
          than the snapshot, so a policy created after the snapshot (and
          already written through by another instance) survives.
          Returns {1} when deleted, {0} otherwise.

ARGV[1] = "set": ARGV[2..] field/value pairs, for a policy hash kept by hand
          (no --mysql-url): `redis-cli --eval lua/sync.lua KEY , set rate 20`.
          The fields are written as given (max_permits must be a whole
          number >= 1, rate a number > 0, algorithm a name above, window_ms
          and lease_ms whole numbers >= 1 or "", calendar "" or a unit:
          anything else is refused, naming the value), with the rate
          history below, and `version` is raised by one (a `version` given
          is refused: it is this script's).
          Returns {1, limits}.

Change notices. Every write ("put" that writes, "set", "del" that deletes)
PUBLISHes "<name> <version>" on the channel <prefix>changes (the prefix and
name read off KEYS[1]; version 0 for a delete). Every permitd instance
subscribes and reloads the policy into its in-memory copy (the limits
bucket.lua is sent come from it): an edit is in force on every instance
within milliseconds, and a lost notice is healed by the next sync pass (or,
without MySQL, the next pass over <prefix>policies). PUBLISH in Redis
Cluster reaches the subscribers on every node.

ARGV[1] = "newest": returns {t}, the time of the newest rate edit in the
          policy's history (0: none). permitd reads it before a settle pass.
ARGV[1] = "trim": ARGV[2] a time t from "newest". The settle pass has
          rewritten every bucket stamped before t as of its own time, so
          the history up to and including t is dropped (the field is
          removed when nothing is left). Returns {entries left}.

Rate history (bucket.lua explains how a decision uses it). When "put" or
"set" change the rate of an existing policy, the edit is stamped with Redis
TIME (the moment the new rate is in force for every decision) and the rate
it replaces is kept in the hash's field `rates`, newest first:
"<t>:<rate before t>;..." . Every write carries the field over, and drops
the entries that no bucket can need any more: an entry whose edit an empty
bucket would have outlived, full by now at the rates after it and the
policy's max_permits (a full bucket has no key, so nothing stamped before
that edit can still be below full).

Bucket state keys are not touched here: a limit that changes keeps its
buckets (tokens clamp to the new max_permits inside bucket.lua, and accrue
at each rate for the time it was in force; their expiry is set again by the
settle pass), and the buckets of a deleted policy expire by themselves.
]]

local op = ARGV[1]
local gmatch = string.gmatch
local ALGORITHMS = {[''] = true, token_bucket = true, fixed_window = true, sliding_window = true,
                    sliding_log = true, concurrency = true}
local CALENDARS = {[''] = true, minute = true, hour = true, day = true, month = true}

-- Tells every instance that the policy in KEYS[1] changed (see the top).
local function notify(version)
  local key = KEYS[1]
  local open = key:match('^.*(){')
  local close = open and key:find('}', open, true)
  if open and close then
    redis.call('PUBLISH', key:sub(1, open - 1) .. 'changes',
               key:sub(open + 1, close - 1) .. ' ' .. tostring(version or 0))
  end
end

-- The history `rates` (or nil) with the entries dropped that no bucket can
-- need at Redis time now, for a policy of max_permits max and rate `rate`:
-- going from the newest edit back, the tokens an empty bucket stamped just
-- before each edit has earned by now; from the first entry where that
-- reaches max, that entry and all older ones go. nil when nothing is left.
local function prune(rates, now, max, rate)
  if not rates or not max or not rate then
    return rates
  end
  local kept, earned, later, after = {}, 0, now, rate
  for t, r in gmatch(rates, '([^:;]+):([^;]*)') do
    local tn, rn = tonumber(t), tonumber(r)
    if not tn or not rn then
      return rates        -- not ours: left for bucket.lua to refuse
    end
    if later > tn then
      earned = earned + (later - tn) * after / 1000000
    end
    if earned >= max then
      break
    end
    kept[#kept + 1] = t .. ':' .. r
    later, after = tn, rn
  end
  if #kept == 0 then
    return nil
  end
  return table.concat(kept, ';')
end

-- The history after an edit of the rate from `old` to `new` (strings, as
-- the hash holds them; nil old: a new policy, no edit) on top of `rates`,
-- pruned for a policy of max_permits max.
local function history(rates, old, new, max)
  local clock = redis.call('TIME')
  local now = clock[1] * 1000000 + clock[2]
  if old and tonumber(old) and tonumber(old) ~= tonumber(new) then
    local top = rates and tonumber(string.match(rates, '^([^:;]+):'))
    -- An edit in the same microsecond as the last one (or with the clock
    -- stepped back behind it) adds no entry: the rate it replaces was in
    -- force for no time, and the times must keep decreasing.
    if not top or top < now then
      rates = string.format('%.0f', now) .. ':' .. old .. (rates and (';' .. rates) or '')
    end
  end
  return prune(rates, now, tonumber(max), tonumber(new))
end

if op == 'put' then
  local id, version, taken = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
  local flat = redis.call('HGETALL', KEYS[1])
  local cur = {}
  for i = 1, #flat, 2 do
    cur[flat[i]] = flat[i + 1]
  end
  local cur_id, cur_version = tonumber(cur.id), tonumber(cur.version)
  if cur_id then
    if cur_id > id then
      return {0, 0}
    end
    if cur_id == id and cur_version then
      if cur_version > version then
        return {0, 0}
      end
      if cur_version == version and (tonumber(cur.synced_us) or 0) >= taken then
        return {0, 0}
      end
    end
    local same, given = true, {}
    for i = 5, #ARGV, 2 do
      given[ARGV[i]] = true
      if cur[ARGV[i]] ~= ARGV[i + 1] then
        same = false
        break
      end
    end
    -- A limit the offer lacks is a change too: a token bucket leaves out
    -- the algorithm fields a policy of another algorithm had, and they
    -- leave out its rate; a policy that enforces leaves out `shadow`.
    for _, f in ipairs({'rate', 'algorithm', 'window_ms', 'calendar', 'lease_ms', 'shadow',
                        'local_lease', 'local_lease_permits', 'reserve_ttl_ms', 'debt_floor',
                        'reserve_expiry'}) do
      if same and cur[f] and not given[f] then
        same = false
      end
    end
    if same then
      return {0, 0}
    end
  end
  redis.call('DEL', KEYS[1])
  local fields, offered = {'synced_us', ARGV[4]}, {}
  for i = 5, #ARGV, 2 do
    fields[#fields + 1] = ARGV[i]
    fields[#fields + 1] = ARGV[i + 1]
    offered[ARGV[i]] = ARGV[i + 1]
  end
  -- Only a token bucket has a rate, and a history of it.
  local rates = offered.rate and
                history(cur.rates, cur_id and cur.rate, offered.rate, offered.max_permits)
  if rates then
    fields[#fields + 1] = 'rates'
    fields[#fields + 1] = rates
  end
  redis.call('HSET', KEYS[1], unpack(fields))
  local limits = 0
  if cur_id and cur.rate and offered.rate then
    for i = 5, #ARGV, 2 do
      local f = ARGV[i]
      if (f == 'max_permits' or f == 'rate') and tonumber(cur[f]) ~= tonumber(ARGV[i + 1]) then
        limits = 1
      end
    end
  end
  notify(offered.version)
  return {1, limits}
end

if op == 'set' then
  if #ARGV < 3 or #ARGV % 2 ~= 1 then
    return redis.error_reply('sync.lua set: give field/value pairs, e.g. set rate 20')
  end
  local offered = {}
  for i = 2, #ARGV, 2 do
    local f, v = ARGV[i], ARGV[i + 1]
    local x = tonumber(v)
    if f == 'rates' then
      return redis.error_reply('sync.lua set: rates is the rate history this script keeps; ' ..
                               'set rate instead')
    elseif f == 'version' then
      return redis.error_reply('sync.lua set: version is raised by this script on every set; ' ..
                               'leave it out')
    elseif f == 'max_permits' and (not x or x < 1 or x ~= math.floor(x) or x >= 2 ^ 53) then
      return redis.error_reply('sync.lua set: max_permits must be a whole number >= 1, not "' ..
                               v .. '"')
    elseif f == 'rate' and (not x or not (x > 0) or x == math.huge) then
      return redis.error_reply('sync.lua set: rate must be a number > 0 (permits a second), not "' ..
                               v .. '"')
    elseif f == 'algorithm' and not ALGORITHMS[v] then
      return redis.error_reply('sync.lua set: algorithm must be token_bucket, fixed_window, ' ..
                               'sliding_window, sliding_log or concurrency, not "' .. v .. '"')
    elseif (f == 'window_ms' or f == 'lease_ms') and v ~= '' and
           (not x or x < 1 or x ~= math.floor(x) or x >= 2 ^ 53) then
      return redis.error_reply('sync.lua set: ' .. f .. ' must be a whole number of ms >= 1 ' ..
                               'or "", not "' .. v .. '"')
    elseif f == 'shadow' and v ~= '0' and v ~= '1' then
      return redis.error_reply('sync.lua set: shadow must be 1 (shadow mode) or 0, not "' ..
                               v .. '"')
    elseif f == 'local_lease' and v ~= 'off' and v ~= 'on' and v ~= 'auto' then
      return redis.error_reply('sync.lua set: local_lease must be off, on or auto, not "' ..
                               v .. '"')
    elseif f == 'local_lease_permits' and (not x or x < 1 or x ~= math.floor(x) or x > 1000000) then
      return redis.error_reply('sync.lua set: local_lease_permits must be a whole number ' ..
                               'from 1 to 1000000, not "' .. v .. '"')
    elseif f == 'calendar' and not CALENDARS[v] then
      return redis.error_reply('sync.lua set: calendar must be "", minute, hour, day or month, ' ..
                               'not "' .. v .. '"')
    end
    offered[f] = v
  end
  local cur = redis.call('HMGET', KEYS[1], 'rate', 'max_permits', 'rates')
  local rate = offered.rate or cur[1]
  local max = offered.max_permits or cur[2]
  local limits = 0
  if (offered.rate and cur[1] and tonumber(cur[1]) ~= tonumber(offered.rate)) or
     (offered.max_permits and cur[2] and tonumber(cur[2]) ~= tonumber(offered.max_permits)) then
    limits = 1
  end
  local fields = {}
  for i = 2, #ARGV do
    fields[#fields + 1] = ARGV[i]
  end
  redis.call('HSET', KEYS[1], unpack(fields))
  local rates = cur[3] or nil
  if rate then
    rates = history(rates, offered.rate and cur[1] or nil, rate, max)
  end
  if rates then
    redis.call('HSET', KEYS[1], 'rates', rates)
  elseif cur[3] then
    redis.call('HDEL', KEYS[1], 'rates')
  end
  notify(redis.call('HINCRBY', KEYS[1], 'version', 1))
  return {1, limits}
end

if op == 'newest' then
  local rates = redis.call('HGET', KEYS[1], 'rates')
  return {rates and tonumber(string.match(rates, '^(%d+):')) or 0}
end

if op == 'trim' then
  local upto = tonumber(ARGV[2])
  local rates = redis.call('HGET', KEYS[1], 'rates')
  if not upto then
    return redis.error_reply('sync.lua trim: not a time: ' .. tostring(ARGV[2]))
  end
  if not rates then
    return {0}
  end
  local kept = {}
  for t, r in gmatch(rates, '([^:;]+):([^;]*)') do
    local tn = tonumber(t)
    if tn and tn <= upto then
      break
    end
    kept[#kept + 1] = t .. ':' .. r
  end
  if #kept == 0 then
    redis.call('HDEL', KEYS[1], 'rates')
  else
    redis.call('HSET', KEYS[1], 'rates', table.concat(kept, ';'))
  end
  return {#kept}
end

if op == 'del' then
  local cur = redis.call('HMGET', KEYS[1], 'id', 'updated_us')
  local cur_id, cur_updated = tonumber(cur[1]), tonumber(cur[2])
  local snapshot_us, max_id = tonumber(ARGV[2]), tonumber(ARGV[3])
  if cur_id and cur_id <= max_id and cur_updated and cur_updated < snapshot_us then
    redis.call('DEL', KEYS[1])
    notify(0)
    return {1}
  end
  return {0}
end

return redis.error_reply('sync.lua: unknown operation ' .. tostring(op))
