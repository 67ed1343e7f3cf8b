--[[
lua/lib/call.lua - the call every decision script of issue 20 takes
(sliding_window.lua's header spells it out), read into locals: spliced by
cmake/lua_splice.cmake where a script says `-- @include call.lua`, after
its `local SCRIPT = '<name>.lua'`; the script then checks `mode` against
its own modes and includes lua/lib/keys.lua.

  mode, inspect  ARGV[1]; "inspect" is a peek that answers more (each
                 script's header): decided as one, with inspect true
  np, rid_ttl    ARGV[2], ARGV[3] as numbers (rid_ttl 0: no record kept);
                 a number argument that is nearly always "1" (np, an
                 item's policy and permits) is read as `s == '1' and 1 or
                 tonumber(s)`: strtod() costs Redis ~1.2k instructions
  per            ARGV an item: 2 in a compact call (ARGV[3] ""), else 4
  base           ARGV index of item 1's policy; m = #KEYS; n the items
  RECORD         an item's answer: 10 numbers and 32 bytes of lease; a
  NO_LEASE       compact call's, its first 8 numbers alone (struct.pack
                 ignores the rest; no request id, no lease)
  STALE ...      the answer's status numbers (lua/bucket.lua's header)
  FOREVER_MS     the cap of every ms answered (lua/bucket.lua)
  format         string.format: a whole number of ms for PX or PEXPIRE
                 is sent as format('%d', ms), not as a number, which Redis
                 prints with snprintf('%.17g'), ~3.4k instructions a call
                 against ~1.8k (issue 41)
Each is one local of the chunk, as if written in the script: no table, no
closure is built for them (each costs every call: tests/bench/redis-cost.sh).
]]
local mode = ARGV[1]
local inspect = mode == 'inspect'
if inspect then
  mode = 'peek'
end
local np = ARGV[2] == '1' and 1 or tonumber(ARGV[2])
local per = ARGV[3] == '' and 2 or 4   -- ARGV an item: "" = compact (the header)
local rid_ttl = per == 4 and tonumber(ARGV[3]) or 0   -- no call of tonumber() when compact
local base = 4 + 4 * np
local m = #KEYS
local n = (#ARGV - base + 1 + m) / (per + 1)
local floor, ceil, format = math.floor, math.ceil, string.format
local pack, unpack_struct = struct.pack, struct.unpack
local RECORD = per == 4 and '<dddddddddd' or '<dddddddd'
local NO_LEASE = per == 4 and string.rep('\0', 32) or ''
local STALE, DATA_LOSS, INTERNAL, OUT_OF_RANGE, ABORTED = -17, -15, -13, -11, -10
local FOREVER_MS = 99999999999999   -- see lua/bucket.lua
