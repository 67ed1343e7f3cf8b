  --[[
  lua/lib/refund_sliding_window.lua - lua/sliding_window.lua's mode
  "refund" (issue 38): permits given back to the counter of the aligned
  window their take was counted in. One wide item (KEYS[1]; its permits
  the amount, its third argument, the request id's slot, the Redis time
  in us of the take). The state is rolled to now first: a take of the
  current window comes off cur, one of the previous window off prev
  (whose weight then shrinks the estimate as if it had never been
  taken), one older counts nothing any more and gives nothing back (a
  no-op), as does one whose time is not given (""). No counter goes below
  0. Answers one RECORD: allowed 1 when anything was given back (else
  flags 2), remaining after it, lease_expires_ms the permits given back.

  Mode "charge" (a reservation's commit above its estimate): the permits
  are added to the current window's counter, whatever the estimate, up
  to where the weighted estimate reaches max_permits + floor (the item's
  fourth argument, the policy's debt floor): takes then wait until the
  estimate has fallen back below max_permits (retry_after_ms, as for any
  shortfall). lease_expires_ms answers the permits charged.
  ]]
  local charge = mode == 'charge'
  local floor_debt = charge and tonumber(ARGV[base + 3]) or 0
  local p = policy(tonumber(ARGV[base]) or 0)
  local give, at = tonumber(ARGV[base + 1]), tonumber(ARGV[base + 2])
  if n ~= 1 or per ~= 4 or not p or not give or give < 1 or give ~= floor(give) or
     not floor_debt or floor_debt < 0 then
    return redis.error_reply('sliding_window.lua: refund takes one wide item of whole permits ' ..
                             '>= 1 and a policy with max_permits and window_ms >= 1')
  end
  local s = redis.call('GET', KEYS[1])
  local prev, cur, start, v = 0, 0, 0, 0
  if s then
    if #s ~= 32 then
      return pack(RECORD, -15, 0, #s, p.max, 0, 0, 0, 0, 0, 0) .. NO_LEASE
    end
    prev, cur, start, v = unpack_struct(STATE, s)
    if v > p.ver then
      return pack(RECORD, STALE, 0, v, p.max, 0, 0, 0, 0, 0, 0) .. NO_LEASE
    end
  end
  prev, cur, start = roll(prev, cur, start, p.w, now)
  local back = 0
  if charge then
    back = floor(p.max + floor_debt - weighted(prev, cur, start, p.w, now))
    if back > give then
      back = give
    end
    if back > 0 then
      cur = cur + back
    else
      back = 0
    end
  elseif at and at >= start and at < start + p.w then
    back = give < cur and give or cur
    cur = cur - back
  elseif at and at >= start - p.w and at < start then
    back = give < prev and give or prev
    prev = prev - back
  end
  local reset = reset_after(prev, cur, start, p.w)
  if back > 0 and reset > 0 then
    redis.call('SET', KEYS[1], pack(STATE, prev, cur, start, p.ver), 'PX', reset)
  elseif back > 0 then
    redis.call('DEL', KEYS[1])
  end
  local left = floor(p.max - weighted(prev, cur, start, p.w, now))
  if left < 0 then
    left = 0
  end
  return pack(RECORD, 0, back > 0 and 1 or 0, left, p.max, 0, reset, p.window_s, left * 1000000,
              back, back > 0 and 0 or 2) .. NO_LEASE
