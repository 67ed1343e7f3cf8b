  --[[
  lua/lib/refund_fixed_window.lua - lua/fixed_window.lua's mode "refund"
  (issue 38): permits given back to one window counter, in the same
  window only. One wide item (KEYS[1]; its permits the amount, its third
  argument, the request id's slot, the Redis time in us of the take that
  took them). A take of an earlier window counts nothing any more: its
  refund gives nothing back (a no-op), and so does one whose time is not
  given (""): a refund of another window's take into this one would let
  this window admit more than max_permits. The count never goes below 0.
  Answers one RECORD: allowed 1 when anything was given back (else flags
  2), remaining after it, lease_expires_ms the permits given back.

  Mode "charge" (a reservation's commit above its estimate): the permits
  are added to the current window's count, whatever it holds, up to
  max_permits + floor (the item's fourth argument, the policy's debt
  floor): the window then admits nothing more until it ends (a debt
  lasts until the window does; retry_after_ms is its end).
  lease_expires_ms answers the permits charged.
  ]]
  local charge = mode == 'charge'
  local floor_debt = charge and tonumber(ARGV[base + 3]) or 0
  local p = policy(tonumber(ARGV[base]) or 0)
  local give, at = tonumber(ARGV[base + 1]), tonumber(ARGV[base + 2])
  if n ~= 1 or per ~= 4 or not p or not p.start or not p.max or p.max < 1 or not give or
     give < 1 or give ~= floor(give) or not floor_debt or floor_debt < 0 then
    return redis.error_reply('fixed_window.lua: refund takes one wide item of whole permits ' ..
                             '>= 1 and a policy with a window')
  end
  local s = redis.call('GET', KEYS[1])
  local count, start = 0, p.start
  if s then
    if #s ~= 24 then
      return pack(RECORD, -15, 0, #s, p.max, 0, 0, 0, 0, 0, 0) .. NO_LEASE
    end
    local stored, st, v = unpack_struct(STATE, s)
    if v > p.ver then
      return pack(RECORD, STALE, 0, v, p.max, 0, 0, 0, 0, 0, 0) .. NO_LEASE
    end
    if st >= p.start then
      count, start = stored, st
    end
  end
  local back = 0
  if charge then
    back = p.max + floor_debt - count
    if back > give then
      back = give
    end
    if back > 0 then
      count = count + back
      redis.call('SET', KEYS[1], pack(STATE, count, start, p.ver), 'PX', p.left)
    else
      back = 0
    end
  elseif at and at >= p.start and at < p.stop and count > 0 then
    back = give < count and give or count
    count = count - back
    if count > 0 then
      redis.call('SET', KEYS[1], pack(STATE, count, start, p.ver), 'PX', p.left)
    else
      redis.call('DEL', KEYS[1])
    end
  end
  local left = p.max - count > 0 and p.max - count or 0
  return pack(RECORD, 0, back > 0 and 1 or 0, left, p.max, 0, count > 0 and p.left or 0,
              p.window, left * 1000000, back, back > 0 and 0 or 2) .. NO_LEASE
