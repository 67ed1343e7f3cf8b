--[[
lua/lib/keys.lua - the items' keys and the clock, for the scripts that
include lua/lib/call.lua (after their check of `mode`): a call whose
arguments do not make whole items is refused with an error naming the
script (SCRIPT); keys[i] is item i's state key, KEYS[i] for i <= m, else
the ARGV after the items (lua/bucket.lua's header: keys of several slots
of one master); now is Redis TIME in us, the only clock.
]]
if not np or n % 1 ~= 0 or n < m then     -- not whole (% 1: no call of floor())
  return redis.error_reply(SCRIPT .. ': ' .. #ARGV .. ' arguments and ' .. m ..
                           ' keys do not make whole items of ' .. tostring(ARGV[2]) .. ' policies')
end

local keys = KEYS       -- a table built only when keys follow the items
if n > m then
  keys = {}
  for i = 1, m do
    keys[i] = KEYS[i]
  end
  for i = m + 1, n do
    keys[i] = ARGV[base + per * n + i - m - 1]
  end
end

local clock = redis.call('TIME')
local now = clock[1] * 1000000 + clock[2]
