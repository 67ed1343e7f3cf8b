--[[
lua/lib/ms_up.lua - ms_up(us): a span of Redis time in us as the whole ms
a client is told, rounded up (a client that waits it is not early), 0 for
none, capped at FOREVER_MS (lua/lib/call.lua). Spliced where a script
builds its helpers: after any path decided before them (a `local
function` is a closure built on every call that reaches it).
]]
local function ms_up(us)
  if us <= 0 then
    return 0
  end
  local ms = ceil(us / 1000)
  if ms > FOREVER_MS then
    return FOREVER_MS
  end
  return ms
end
