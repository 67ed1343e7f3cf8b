  --[[
  lua/lib/refund_bucket.lua - lua/bucket.lua's mode "refund" (issue 38):
  permits given back to one token bucket (unused permits of a local
  lease, a reservation's estimate above what it cost). One wide item,
  KEYS[1] its state key; ARGV as a take's (ARGV[3] unused), the item's
  permits the amount to give back, its third argument (the request id
  slot) the Redis time of the take in us (unused here: a token bucket
  does not care when its tokens were taken). The bucket is first brought
  to now exactly as a decision reads it (folded across rate edits, then
  refilled at the rate in force: nothing earned is re-priced), then the
  permits are added, never above max_permits: a bucket that reaches its
  max is full, and a full bucket has no key. Answers one RECORD: allowed
  1 when anything was given back (else flags 2, no-op), remaining and
  level_micro after it, lease_expires_ms the permits given back, to the
  nearest whole one (what a cap at max_permits did not keep). A stale or foreign state
  answers as a take would; nothing is written then.

  Mode "charge" (a reservation's commit above its estimate): the same
  call, its permits taken now whether the bucket holds them or not, down
  to -floor (the item's fourth argument, the policy's debt floor, >= 0):
  a bucket in debt refills from below zero at its rate, so a take waits
  until the debt is paid (retry_after_ms says how long, exactly as for
  any shortfall). lease_expires_ms answers the whole permits charged
  (what the floor did not cut off).
  ]]
  local charge = mode == 'charge'
  local floor_debt = charge and tonumber(ARGV[base + 3]) or 0
  local ver, max, rate, rates = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6]), ARGV[7]
  local give = tonumber(ARGV[base + 1])
  if n ~= 1 or per ~= 4 or not max or not rate or max < 1 or rate <= 0 or rate ~= rate or
     not give or give < 1 or give ~= floor(give) or not floor_debt or floor_debt < 0 then
    return redis.error_reply('bucket.lua: refund takes one wide item of whole permits >= 1 ' ..
                             'and a policy with max_permits >= 1 and rate > 0')
  end
  local s = redis.call('GET', KEYS[1])
  local stored, since = nil, now
  if s then
    local written
    stored, since, written = state(s)
    if not stored then
      return pack(ANSWER, -15, 0, since, max, 0, 0, 0, 0, 0, 0, NOLEASE)
    elseif written > ver then
      return pack(ANSWER, STALE, 0, written, max, 0, 0, 0, 0, 0, 0, NOLEASE)
    end
    if rates ~= '' and stored < max then
      local top = newest(rates)
      if not top or since < top then
        stored, since = fold(stored, since, max, rates)
        if not stored then
          return pack(ANSWER, -13, 0, 0, 0, 0, 0, 0, 0, 0, 0, NOLEASE)
        end
      end
    end
    if since > now then
      since = now
    end
  end
  local tokens = level(stored, since, max, rate, now)
  local back = give             -- refunded, or charged
  if charge then
    if tokens - back < -floor_debt then
      back = tokens + floor_debt
    end
    if back < 0 then
      back = 0
    end
    tokens = tokens - back
  else
    if tokens + back > max then
      back = max - tokens
    end
    if back < 0 then
      back = 0
    end
    tokens = tokens + back
  end
  local ttl = 0
  if tokens < max then
    ttl = ceil((max - tokens) * 1000 / rate)
    if ttl > FOREVER_MS then
      ttl = FOREVER_MS
    end
  end
  if back > 0 and ttl > 0 then
    redis.call('SET', KEYS[1], pack(STATE, tokens, now, ver), 'PX', ttl)
    if not s then
      index_update({KEYS[1]})       -- a charge made the bucket (bucket.lua's top)
    end
  elseif back > 0 and s then
    redis.call('DEL', KEYS[1])      -- full: no key (its index entry goes at the next settle)
  end
  local w = ceil(max / rate)
  if w > FOREVER_MS then
    w = FOREVER_MS
  end
  local mic = floor(tokens * 1000000)
  if mic < 0 then
    mic = 0
  end
  if mic > 9007199254740992 then
    mic = 9007199254740992
  end
  -- the permits given back or charged, to the nearest whole one (a cap at max
  -- after a refill of a fraction meanwhile gives back 19.9999 of 20: 20)
  return pack(ANSWER, 0, back > 0 and 1 or 0, floor(tokens), max, 0, ttl, w, mic,
              floor(back + 0.5), back > 0 and 0 or 2, NOLEASE)
