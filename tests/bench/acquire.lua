-- wrk script for permitd (Acquire, AcquireBatch) and the Node peer.
--
-- Set through the environment (wrk passes no options to a script that it
-- also hands the URL to, so the environment is simplest):
--   BENCH_CODEC    proto | json                      (default proto)
--   BENCH_BUCKET   the policy name                   (default hot)
--   BENCH_APP      the calling app                   (default bench)
--   BENCH_KEYS     0: no key (the policy's shared bucket);
--                  N: key user-000000..user-(N-1), random per request
--   BENCH_BATCH    0: one Acquire per request; M: AcquireBatch of M items
--                  (binary only), each with its own random key
--   BENCH_VARIANTS how many distinct batch bodies to precompute (default 1000)
--   BENCH_API_KEY  an app's API key, sent as Authorization: Bearer (issue 21;
--                  unset: none, for a permitd run with --app-auth off)
--
-- Every request is built before the clock starts (init), so wrk's own cost
-- per request is a table lookup. done() prints one line to parse:
--   BENCH rps=... p50_us=... p99_us=... p999_us=... requests=... non2xx=... sockerr=...
-- and for batches a second one with every item's outcome:
--   BATCH items_ok=... items_err=... items_allowed=... first_err=<code or ->

local codec    = os.getenv("BENCH_CODEC") or "proto"
local bucket   = os.getenv("BENCH_BUCKET") or "hot"
local app      = os.getenv("BENCH_APP") or "bench"
local nkeys    = tonumber(os.getenv("BENCH_KEYS") or "0")
local batch    = tonumber(os.getenv("BENCH_BATCH") or "0")
local variants = tonumber(os.getenv("BENCH_VARIANTS") or "1000")

-- protobuf: varints and length-delimited fields are all AcquireRequest needs
local function varint(n)
  local out = {}
  repeat
    local b = n % 128
    n = (n - b) / 128
    if n > 0 then b = b + 128 end
    out[#out + 1] = string.char(b)
  until n == 0
  return table.concat(out)
end

local function field_bytes(tag, s)
  return string.char(tag * 8 + 2) .. varint(#s) .. s
end

local function acquire_proto(key)
  local m = field_bytes(1, bucket) .. field_bytes(2, app)
  if key ~= "" then m = m .. field_bytes(3, key) end
  return m .. string.char(4 * 8 + 0) .. varint(1)     -- permits = 1
end

local function acquire_json(key)
  if key == "" then
    return string.format('{"bucket":"%s","app":"%s","permits":1}', bucket, app)
  end
  return string.format('{"bucket":"%s","app":"%s","key":"%s","permits":1}', bucket, app, key)
end

local function key_of(i)
  return string.format("user-%06d", i)
end

local function random_key()
  if nkeys <= 0 then return "" end
  return key_of(math.random(0, nkeys - 1))
end

local content_type = codec == "json" and "application/json" or "application/proto"
wrk.method = "POST"
wrk.headers["Content-Type"] = content_type
wrk.headers["Connect-Protocol-Version"] = "1"
if os.getenv("BENCH_API_KEY") then
  wrk.headers["Authorization"] = "Bearer " .. os.getenv("BENCH_API_KEY")
end

local function body_for(key)
  if codec == "json" then return acquire_json(key) end
  return acquire_proto(key)
end

local dynamic = nkeys > 0 or batch > 0
if not dynamic then
  wrk.body = body_for("")
end

local reqs, nreqs = nil, 0

function init(args)
  math.randomseed(os.time() + (tonumber(tostring({}):match("0x(%x+)") or "0", 16) or 0))
  if not dynamic then return end
  reqs = {}
  if batch > 0 then
    for v = 1, variants do
      local items = {}
      for i = 1, batch do
        items[i] = field_bytes(1, acquire_proto(random_key()))
      end
      reqs[v] = wrk.format(nil, nil, nil, table.concat(items))
    end
  else
    for i = 0, nkeys - 1 do
      reqs[i + 1] = wrk.format(nil, nil, nil, body_for(key_of(i)))
    end
  end
  nreqs = #reqs
end

if dynamic then
  function request()
    return reqs[math.random(nreqs)]
  end
end

-- AcquireBatch: every item's outcome, counted from the replies (an item's
-- error, say unavailable, still comes in an HTTP 200). Only for batches: at
-- their request rate decoding costs wrk nothing worth noting.
local threads = {}
function setup(thread)
  threads[#threads + 1] = thread
end

items_ok, items_err, items_allowed, first_err = 0, 0, 0, ""

local function read_varint(s, i)
  local v, mul = 0, 1
  while true do
    local b = s:byte(i)
    if b == nil then return v, i end
    i = i + 1
    v = v + (b % 128) * mul
    if b < 128 then return v, i end
    mul = mul * 128
  end
end

if batch > 0 then
  function response(status, headers, body)
    if status ~= 200 or body == nil then return end
    local i, n = 1, #body
    while i <= n do
      local key, len
      key, i = read_varint(body, i)
      len, i = read_varint(body, i)
      if key == 10 then                                 -- results (AcquireBatchResult)
        local inner = len > 0 and body:byte(i) or 0
        if inner == 18 then                             -- error (BatchError)
          items_err = items_err + 1
          if first_err == "" then
            local _, j = read_varint(body, i + 1)
            if body:byte(j) == 10 then                  -- its code
              local cl, k = read_varint(body, j + 1)
              first_err = body:sub(k, k + cl - 1)
            end
          end
        else                                            -- response (AcquireResponse)
          items_ok = items_ok + 1
          if inner == 10 then
            local l2, j = read_varint(body, i + 1)
            if l2 > 1 and body:byte(j) == 8 and body:byte(j + 1) == 1 then
              items_allowed = items_allowed + 1
            end
          end
        end
      end
      i = i + len
    end
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
  if batch > 0 then
    local ok, err, allowed, first = 0, 0, 0, ""
    for _, t in ipairs(threads) do
      ok = ok + (t:get("items_ok") or 0)
      err = err + (t:get("items_err") or 0)
      allowed = allowed + (t:get("items_allowed") or 0)
      if first == "" then first = t:get("first_err") or "" end
    end
    io.write(string.format("BATCH items_ok=%d items_err=%d items_allowed=%d first_err=%s\n",
      ok, err, allowed, first ~= "" and first or "-"))
  end
end
