--[[
lease_return.lua - gives a local lease's unused permits back to its bucket
(server/decisions/locallease.c, issue 41), atomically, inside Redis.

A lease is an ordinary take of the bucket's decision script (bucket.lua,
fixed_window.lua) carrying a request id of permitd's own (the lease id,
which starts with byte 0x01: no client can send one) and, as ARGV[3], the
lease's life R in ms: the script keeps the take's RECORD under
KEYS[1] .. "\x1f" .. "r" .. lease id for R ms. That key is the lease: while
it exists, its unused permits may come back; once it has expired they may
not (the instance stopped granting before then, and the bucket has been
refilling since: a late give-back would admit them twice).
  KEYS[1]  the bucket's state key
  ARGV[1]  the algorithm: "token_bucket" or "fixed_window"
  ARGV[2]  the policy's max_permits now
  ARGV[3]  the lease id
  ARGV[4]  unused permits to give back (>= 0)
  ARGV[5]  R, the lease's life in ms (as the take's ARGV[3])
  ARGV[6]  P, the permits the take paid for the refill over R (token
           bucket; 0 for a fixed window)
Answers '<dd': the whole permits given back (0: the bucket had no room,
or a window had ended), and the unused permits refused because the
lease's key had expired (the give-back came too late: they stay spent).
The lease's key is deleted: a second give-back of one lease gives
nothing.

Token bucket: the state's tokens (measured at its time) + the unused
permits + the part of P the lease's remaining life did not use,
P x (PTTL - 1) / R (its key's remaining life, less a millisecond for the
rounding: never more), never above max_permits; its time, version stamp and expiry stay (the
bucket is full sooner, so the key outlives fullness a little: a full
bucket's state reads as max). Nothing is re-priced: the permits come back
as permits, and a rate history folds the bucket as it would have (each
segment capped at max, so never more than it would have held). No state
(a full bucket) takes nothing back.
Fixed window: the count of the window the lease was taken in, less the
permits (never below 0); a window started after the lease was taken is
left alone. The lease's start is read off its key's remaining life
(now - (R - PTTL), to the millisecond): a window that started less than
1 ms before that estimate counts as another one (nothing given back:
never more).
]]
local STATE = '<ddd'
local algo, max, id = ARGV[1], tonumber(ARGV[2]), ARGV[3]
local r, life, p = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local rkey = KEYS[1] .. '\31r' .. id
local pttl = redis.call('PTTL', rkey)
if not r or r < 0 or not max or not life or life <= 0 or not p or p < 0 then
  return redis.error_reply('lease_return.lua: bad arguments')
end
if pttl <= 0 then
  return struct.pack('<dd', 0, r)
end
redis.call('DEL', rkey)
local s = redis.call('GET', KEYS[1])
if not s or #s ~= 24 then
  return struct.pack('<dd', 0, 0)
end
local a, since, ver = struct.unpack(STATE, s)
if algo == 'token_bucket' then
  local back = r
  if pttl > 1 and pttl <= life then
    back = back + p * (pttl - 1) / life
  end
  local t = a + back
  if t > max then
    t = max
  end
  if t <= a then
    return struct.pack('<dd', 0, 0)
  end
  redis.call('SET', KEYS[1], struct.pack(STATE, t, since, ver), 'KEEPTTL')
  return struct.pack('<dd', math.floor(t) - math.floor(a), 0)
elseif algo == 'fixed_window' then
  local clock = redis.call('TIME')
  local now_ms = clock[1] * 1000 + math.floor(clock[2] / 1000)
  local taken_ms = now_ms - (life - pttl)
  if since > (taken_ms - 1) * 1000 then
    return struct.pack('<dd', 0, 0)
  end
  local c = a - r
  if c < 0 then
    c = 0
  end
  redis.call('SET', KEYS[1], struct.pack(STATE, c, since, ver), 'KEEPTTL')
  return struct.pack('<dd', a - c, 0)
end
return redis.error_reply('lease_return.lua: algorithm "' .. tostring(algo) ..
                         '" is not token_bucket or fixed_window')
