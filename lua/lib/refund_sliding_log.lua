  --[[
  lua/lib/refund_sliding_log.lua - lua/sliding_log.lua's mode "refund"
  (issue 38): permits given back to a log by removing entries. One wide
  item (KEYS[1]; its permits the amount, its third argument, the request
  id's slot, the Redis time in us of the take). The entries removed are
  those still in the window scored at or before that time, newest first:
  the take's own entries when they are there (a take scores its entries
  at its time, or just after the newest entry), else older ones, which
  would have aged out sooner, so the log never admits more than had the
  take itself been undone. A time not given ("") gives nothing back (a
  no-op): removing a later take's entries would let the window admit
  more than max_permits. Answers one RECORD: allowed 1 when anything was
  given back (else flags 2), remaining after it, lease_expires_ms the
  permits given back.

  Mode "charge" (a reservation's commit above its estimate): the permits
  are added as entries of now (as a take scores them), up to a count of
  max_permits + floor in the window (the item's fourth argument, the
  policy's debt floor): takes wait until enough entries have aged out.
  lease_expires_ms answers the permits charged.
  ]]
  local charge = mode == 'charge'
  local floor_debt = charge and tonumber(ARGV[base + 3]) or 0
  local p = policy(tonumber(ARGV[base]) or 0)
  local give, at = tonumber(ARGV[base + 1]), tonumber(ARGV[base + 2])
  if n ~= 1 or per ~= 4 or not p or not give or give < 1 or give ~= floor(give) or
     not floor_debt or floor_debt < 0 then
    return redis.error_reply('sliding_log.lua: refund takes one wide item of whole permits ' ..
                             '>= 1 and a policy with max_permits and window_ms >= 1')
  end
  local k = KEYS[1]
  local v = redis.pcall('ZSCORE', k, 'v')
  if type(v) == 'table' and v.err then
    if not string.find(v.err, 'WRONGTYPE', 1, true) then
      return v
    end
    return pack(RECORD, -15, 0, 0, p.max, 0, 0, 0, 0, 0, 0) .. NO_LEASE
  end
  if v and -tonumber(v) > p.ver then
    return pack(RECORD, STALE, 0, -tonumber(v), p.max, 0, 0, 0, 0, 0, 0) .. NO_LEASE
  end
  local back = 0
  if charge then
    local count = redis.call('ZCOUNT', k, p.cutoff, '+inf')
    back = p.max + floor_debt - count
    if back > give then
      back = give
    end
    if back > 0 then
      local t = now
      if count > 0 then
        local newest = tonumber(redis.call('ZRANGE', k, -1, -1, 'WITHSCORES')[2])
        if newest >= t then
          t = newest + 1
        end
      end
      redis.call('ZREMRANGEBYSCORE', k, '(0', string.format('%d', now - p.w))
      redis.call('ZADD', k, -p.ver, 'v')
      local ts, args = string.format('%d', t), {}
      for i = 1, back do
        args[#args + 1] = ts
        args[#args + 1] = ts .. ':c' .. i
        if #args >= 2 * CHUNK or i == back then
          redis.call('ZADD', k, unpack(args))
          args = {}
        end
      end
      redis.call('PEXPIRE', k, ms_up(t + p.w - now))
    else
      back = 0
    end
  elseif at and at > now - p.w then
    local gone = redis.call('ZREVRANGEBYSCORE', k, string.format('%d', at), p.cutoff,
                            'LIMIT', 0, give)
    back = #gone
    if back > 0 then
      redis.call('ZREM', k, unpack(gone))
    end
  end
  local count = redis.call('ZCOUNT', k, p.cutoff, '+inf')
  local reset = 0
  if count > 0 then
    local newest = tonumber(redis.call('ZRANGE', k, -1, -1, 'WITHSCORES')[2])
    reset = ms_up(newest + p.w - now)
  elseif back > 0 then
    redis.call('DEL', k)
  end
  local left = p.max - count > 0 and p.max - count or 0
  return pack(RECORD, 0, back > 0 and 1 or 0, left, p.max, 0, reset, p.window_s,
              left * 1000000, back, back > 0 and 0 or 2) .. NO_LEASE
