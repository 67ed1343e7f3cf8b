--[[
reservation.lua - a reservation's record (issue 38), atomically, inside
Redis: what server/decisions/reserve.c holds for a Reserve until its
Commit, Cancel or expiry, and the one transition out of "open" that makes
Commit and Cancel idempotent and retry-safe.

KEYS[1] the record, <prefix>{rsv:<id>}: a hash, in a slot of its own (a
Redis Cluster routes the call by it). Its fields:
  state       pending (claimed, its holds being taken) | open | committed |
              cancelled | expired
  app         the app that reserved it: only it may commit or cancel
  created_us, expires_us   Redis time (us, this node's clock) of the
              reservation and of its expiry
  n           the items; then per item i (1..n) the field "i" =
              "e|at|x|f|b|k": the estimate held, the Redis time of the
              hold on the bucket's node (refunds name its window), the
              expiry rule (keep | refund), the debt floor, the policy and
              the key (last: a key may hold "|"), and once settled i.a
              the actual (commit), i.r permits refunded, i.c charged
The answer is an array of strings: a word, then for the modes that answer
a record its fields as HGETALL gives them (name, value, ...).

ARGV[1] mode:
  claim  ARGV[2] app, ARGV[3] ms the pending record lives (the Reserve's
         deadline): {"new"} when the key was free (state pending, app),
         else {"exists", record...}: a Reserve retried with its request id
         answers the record (or, pending, "retry later")
  open   ARGV[2] the hold's ttl in ms, ARGV[3] ms the record is kept past
         its expiry (a late Commit answers "expired" then, not
         not_found), ARGV[4..] field, value pairs (n and the items): state
         open, stamped created_us = now, expires_us = now + ttl.
         {"ok", created_us, expires_us}
  close  ARGV[2] app, ARGV[3] "committed" or "cancelled", ARGV[4..] the
         actuals a.1 .. a.n (commit): the one transition out of open.
         {"ok", record...} when it was open and is not past expiry: the
         caller then refunds and charges; {"count", n} when a commit's
         actuals are not one per item (nothing changed); {"expired",
         record...} when it was open but past expiry (state expired now: the caller settles
         the expiry as each item's rule says); {"settled", record...}
         when it was settled before (a retry: the caller answers what the
         record says, and changes nothing); {"app"} another app's;
         {"none"} no such record (never was, or gone after its grace)
  expire {"expired", record...} when it was open and is past expiry (now
         expired: the caller settles it), else {"no"}: the sweep's claim
  note   ARGV[2..] field, value pairs (the outcome: i.r, i.c): {"ok"}
  drop   the record deleted (a Reserve refused): {"ok"}
]]

local mode = ARGV[1]
local key = KEYS[1]
local clock = redis.call('TIME')
local now = clock[1] * 1000000 + clock[2]

local function record(word)
  local r = redis.call('HGETALL', key)
  table.insert(r, 1, word)
  return r
end

if mode == 'claim' then
  if redis.call('EXISTS', key) == 1 then
    return record('exists')
  end
  redis.call('HSET', key, 'state', 'pending', 'app', ARGV[2])
  redis.call('PEXPIRE', key, ARGV[3])
  return {'new'}
elseif mode == 'open' then
  local ttl, grace = tonumber(ARGV[2]), tonumber(ARGV[3])
  local expires = now + ttl * 1000
  for i = 4, #ARGV, 2 do
    redis.call('HSET', key, ARGV[i], ARGV[i + 1])
  end
  redis.call('HSET', key, 'state', 'open', 'created_us', string.format('%d', now),
             'expires_us', string.format('%d', expires))
  redis.call('PEXPIRE', key, ttl + grace)
  return {'ok', string.format('%d', now), string.format('%d', expires)}
elseif mode == 'close' or mode == 'expire' then
  local st = redis.call('HMGET', key, 'state', 'app', 'expires_us')
  if not st[1] then
    return {mode == 'close' and 'none' or 'no'}
  end
  if mode == 'close' and st[2] ~= ARGV[2] then
    return {'app'}
  end
  if st[1] ~= 'open' then
    return mode == 'close' and record('settled') or {'no'}
  end
  if mode == 'close' and ARGV[3] == 'committed' and
     #ARGV - 3 ~= tonumber(redis.call('HGET', key, 'n')) then
    return {'count', redis.call('HGET', key, 'n')}   -- the caller's mistake: nothing changes
  end
  if now >= tonumber(st[3]) then
    redis.call('HSET', key, 'state', 'expired')
    return record('expired')
  elseif mode == 'expire' then
    return {'no'}
  end
  redis.call('HSET', key, 'state', ARGV[3])
  for i = 4, #ARGV do
    redis.call('HSET', key, (i - 3) .. '.a', ARGV[i])
  end
  return record('ok')
elseif mode == 'note' then
  for i = 2, #ARGV, 2 do
    redis.call('HSET', key, ARGV[i], ARGV[i + 1])
  end
  return {'ok'}
elseif mode == 'drop' then
  redis.call('DEL', key)
  return {'ok'}
end
return redis.error_reply('reservation.lua: mode "' .. tostring(mode) ..
                         '" is not one of claim, open, close, expire, note, drop')
