-- wrk script for tests/bench/fleet.sh: binary Acquire of one permit, each
-- request on one of BENCH_POLICIES policies (<BENCH_BUCKET>-0 ..
-- <BENCH_BUCKET>-(N-1), round robin), so that N policies have traffic every
-- second and the fleet publisher (server/control/fleet.c) has N policies to
-- write. Bodies are built before the clock starts. done() prints one line:
--   BENCH rps=... p99_us=... requests=... non2xx=...
local bucket = os.getenv("BENCH_BUCKET") or "fleet"
local app = os.getenv("BENCH_APP") or "bench"
local n = tonumber(os.getenv("BENCH_POLICIES") or "100")

local function varint(v)
  local out = {}
  repeat
    local b = v % 128
    v = (v - b) / 128
    if v > 0 then b = b + 128 end
    out[#out + 1] = string.char(b)
  until v == 0
  return table.concat(out)
end

local function field_bytes(tag, s)
  return string.char(tag * 8 + 2) .. varint(#s) .. s
end

local requests = {}
local i = 0

function init(args)
  for k = 0, n - 1 do
    local body = field_bytes(1, bucket .. "-" .. k) .. field_bytes(2, app) .. string.char(4 * 8) .. varint(1)
    requests[k + 1] = wrk.format("POST", nil, { ["Content-Type"] = "application/proto" }, body)
  end
end

function request()
  i = i % n + 1
  return requests[i]
end

function done(summary, latency, requests_)
  io.write(string.format("BENCH rps=%.1f p99_us=%d requests=%d non2xx=%d\n",
    summary.requests / (summary.duration / 1e6), latency:percentile(99), summary.requests,
    summary.errors.status))
end
