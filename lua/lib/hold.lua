  --[[
  lua/lib/hold.lua - mode "hold" (issue 38: a reservation's take,
  server/decisions/reserve.c): decided exactly as "all" (every item
  granted or none takes anything), no request ids (a reservation's record
  makes it retry-safe); the answer is the items' RECORDs followed by one
  more little-endian double, the Redis time (us) of the decision, which
  the reservation keeps: a refund of the hold names the window its take
  was counted in (lua/lib/refund_<algorithm>.lua). Checked here, in the
  branch of modes that are not take or peek, so the lone Acquire pays
  nothing for it.
  ]]
  mode = 'all'
