--[[
naive.lua - the token bucket most people write first, for comparison only.

The bucket is a hash {tokens, ts}: read it (HMGET), refill by the time
passed, take, write both fields back (HSET) and set the expiry (PEXPIRE):
three commands and a two-field hash per key, limits passed in by the caller.
tests/bench/run.sh runs it through redis-benchmark to show the ceiling the
issue's anchors describe (13-18 us of Redis time per call).

KEYS[1]  the bucket hash
ARGV[1]  max permits   ARGV[2]  rate (permits/s)   ARGV[3]  permits wanted
Returns {allowed, remaining}.
]]
local max = tonumber(ARGV[1])
local rate = tonumber(ARGV[2])
local want = tonumber(ARGV[3])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local b = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
local tokens = tonumber(b[1]) or max
local ts = tonumber(b[2]) or now
tokens = math.min(max, tokens + math.max(0, now - ts) * rate / 1000)

local allowed = 0
if tokens >= want then
  tokens = tokens - want
  allowed = 1
end
redis.call('HSET', KEYS[1], 'tokens', tokens, 'ts', now)
redis.call('PEXPIRE', KEYS[1], math.ceil((max - tokens) * 1000 / rate) + 1000)
return {allowed, math.floor(tokens)}
