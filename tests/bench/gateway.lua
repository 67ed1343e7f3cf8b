-- wrk script for forward-auth (tests/bench/gateway.sh): GET requests
-- carrying a random key in a header, through nginx (auth_request) or
-- straight to permitd's /v1/forward-auth.
--
-- Environment:
--   BENCH_KEYS      N: header value user-000000..user-(N-1), random per request
--   BENCH_HEADER    the header the gateway rule keys on (default X-Bench-Key)
--   BENCH_API_KEY   sent as Authorization: Bearer (straight to permitd only;
--                   nginx adds the gateway's key itself)
--   BENCH_ORIGINAL  "1": also send X-Original-URI/-Method, as nginx would
--
-- Requests are built before the clock starts; done() prints the same line
-- as acquire.lua:
--   BENCH rps=... p50_us=... p99_us=... p999_us=... requests=... non2xx=... sockerr=...

local nkeys  = tonumber(os.getenv("BENCH_KEYS") or "100000")
local header = os.getenv("BENCH_HEADER") or "X-Bench-Key"
local reqs   = {}

function init(args)
  local headers = {}
  if os.getenv("BENCH_API_KEY") then
    headers["Authorization"] = "Bearer " .. os.getenv("BENCH_API_KEY")
  end
  if os.getenv("BENCH_ORIGINAL") == "1" then
    headers["X-Original-URI"] = "/ok.txt"
    headers["X-Original-Method"] = "GET"
  end
  math.randomseed(os.time())
  for i = 1, 1000 do
    headers[header] = string.format("user-%06d", math.random(0, nkeys - 1))
    reqs[i] = wrk.format("GET", nil, headers)
  end
  function request()
    return reqs[math.random(1, #reqs)]
  end
end

function done(summary, latency, requests)
  local secs = summary.duration / 1e6
  local e = summary.errors
  io.write(string.format(
    "BENCH rps=%.1f p50_us=%d p99_us=%d p999_us=%d requests=%d non2xx=%d sockerr=%d secs=%.3f\n",
    summary.requests / secs, latency:percentile(50), latency:percentile(99),
    latency:percentile(99.9), summary.requests, e.status,
    e.connect + e.read + e.write + e.timeout, secs))
end
