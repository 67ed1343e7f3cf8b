-- wrk script for the chaos test (tests/chaos/chaos.py): JSON Acquire,
-- alternating between the policies in CHAOS_POLICIES, tallying every answer.
--
-- Environment (wrk hands a script no options of its own):
--   CHAOS_POLICIES  comma-separated policy names        (default tight,loose)
--   CHAOS_APP       the calling app                     (default load)
--   CHAOS_LABEL     printed back in the result line     (default wrk)
--
-- wrk does not say which request a response answers (one thread drives 16
-- connections), so response() reads the policy back from the reply's
-- RateLimit-Policy header ("<policy>";q=..;w=..). Error replies carry no
-- policy (permitd's Connect error body does not name the bucket): they are
-- tallied by status and code under "err".
--
-- Counters are kept per 100 ms slot of wall-clock time (gettimeofday through
-- LuaJIT's ffi, the clock chaos.py uses too), so the test can attribute them
-- to fault windows and check admitted permits against the limit over any
-- interval. done() prints one line:
--   CHAOS {"label":..,"slots":{"<slot>":{"<name>":n,..},..},"summary":{..}}
-- slot = floor(unix time * 10); names: "<policy>:allowed", "<policy>:denied",
-- "<policy>:open" (allowed by failure_mode open: no resetAfterMs in the body),
-- "err:<status>:<code>", "status:<status>".

local ffi = require("ffi")
ffi.cdef [[
typedef struct { long tv_sec; long tv_usec; } chaos_timeval;
int gettimeofday(chaos_timeval *tv, void *tz);
]]
local tv = ffi.new("chaos_timeval")

local function now_slot()
  ffi.C.gettimeofday(tv, nil)
  return tonumber(tv.tv_sec) * 10 + math.floor(tonumber(tv.tv_usec) / 100000)
end

local policies = {}
for p in string.gmatch(os.getenv("CHAOS_POLICIES") or "tight,loose", "[^,]+") do
  policies[#policies + 1] = p
end
local app = os.getenv("CHAOS_APP") or "load"
local label = os.getenv("CHAOS_LABEL") or "wrk"

wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Connect-Protocol-Version"] = "1"

local threads = {}

function setup(thread)
  threads[#threads + 1] = thread
end

-- per thread
local reqs, n = {}, 0
slots = {}

function init(args)
  for i, p in ipairs(policies) do
    reqs[i] = wrk.format("POST", "/permit.v1.RateLimitService/Acquire", nil,
                         string.format('{"bucket":"%s","app":"%s","permits":1}', p, app))
  end
end

function request()
  n = n + 1
  return reqs[(n - 1) % #reqs + 1]
end

-- One flat table, "<slot>|<name>" -> count: wrk's thread:get() copies a
-- table from the thread's Lua state but crashes (SIGSEGV, wrk 4.1.0) on
-- tables nested inside it.
local function bump(slot, name)
  local k = slot .. "|" .. name
  slots[k] = (slots[k] or 0) + 1
end

local function policy_of(headers)
  local v = headers["RateLimit-Policy"] or headers["ratelimit-policy"]
  if v == nil then
    for k, val in pairs(headers) do
      if string.lower(k) == "ratelimit-policy" then
        v = val
        break
      end
    end
  end
  return v and string.match(v, '^"([^"]+)"') or nil
end

function response(status, headers, body)
  local slot = now_slot()
  bump(slot, "status:" .. status)
  if status == 200 then
    local p = policy_of(headers) or "unknown"
    if string.find(body, '"allowed":true', 1, true) then
      if string.find(body, '"resetAfterMs"', 1, true) then
        bump(slot, p .. ":allowed")
      else
        bump(slot, p .. ":open")
      end
    else
      bump(slot, p .. ":denied")
    end
  else
    local code = string.match(body or "", '"code"%s*:%s*"([%a_]+)"') or "none"
    bump(slot, "err:" .. status .. ":" .. code)
  end
end

-- JSON by hand: wrk's LuaJIT has no JSON library.
local function json_counts(t)
  local out = {}
  for k, v in pairs(t) do
    out[#out + 1] = string.format('"%s":%d', k, v)
  end
  return "{" .. table.concat(out, ",") .. "}"
end

function done(summary, latency, requests)
  local merged = {}
  for _, t in ipairs(threads) do
    for key, v in pairs(t:get("slots") or {}) do
      local slot, name = string.match(key, "^(%d+)|(.*)$")
      local m = merged[slot]
      if m == nil then
        m = {}
        merged[slot] = m
      end
      m[name] = (m[name] or 0) + v
    end
  end
  local parts = {}
  for slot, counts in pairs(merged) do
    parts[#parts + 1] = string.format('"%s":%s', slot, json_counts(counts))
  end
  local e = summary.errors
  io.write(string.format(
    'CHAOS {"label":"%s","slots":{%s},"summary":{"requests":%d,"duration_us":%d,' ..
    '"connect":%d,"read":%d,"write":%d,"timeout":%d,"status":%d,' ..
    '"latency_max_us":%d,"latency_p99_us":%d,"latency_p50_us":%d}}\n',
    label, table.concat(parts, ","), summary.requests, summary.duration,
    e.connect, e.read, e.write, e.timeout, e.status,
    latency.max, latency:percentile(99), latency:percentile(50)))
end
