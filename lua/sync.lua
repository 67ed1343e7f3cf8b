--[[
sync.lua - copy one policy from MySQL into Redis, unless Redis already holds
the same or a newer state of it. Several permitd instances sync at once, each
from its own MySQL snapshot; this check, done atomically here, is what stops
an older snapshot from overwriting a newer one.

KEYS[1]  the policy hash <prefix>{<name>}:policy

ARGV[1] = "put": ARGV[2] the row id, ARGV[3] its version, ARGV[4] the
          snapshot's MySQL time in µs, then field/value pairs (which include
          id, version and updated_us). Redis keeps what it has when
            - its row id is newer (the policy was deleted and created again), or
            - its version is newer, or
            - the versions are equal and its snapshot is as new or newer
              (an app list edited with plain SQL changes no version), or
            - every field already has the offered value (nothing changed).
          Otherwise the hash is replaced and stamped synced_us = ARGV[4].
          Returns {written, limits}: written 1 when written, 0 when Redis
          was already up to date; limits 1 when the hash replaced had
          another max_permits or rate (permitd then has bucket.lua "settle"
          the policy's buckets: their keys expire on the old limits'
          schedule).

ARGV[1] = "del": ARGV[2] the snapshot's MySQL time in µs, ARGV[3] the
          highest policy id the snapshot knows of (its rows, and the ids
          its audit names: a deleted row's too). The hash is deleted only when
          it was last changed before the snapshot and its row is not newer
          than the snapshot, so a policy created after the snapshot (and
          already written through by another instance) survives.
          Returns {1} when deleted, {0} otherwise.

Bucket state keys are not touched here: a limit that changes keeps its
buckets (tokens clamp to the new max_permits inside bucket.lua; their
expiry is set again by the settle pass), and the buckets of a deleted
policy expire by themselves.
]]

local op = ARGV[1]

if op == 'put' then
  local id, version, taken = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
  local flat = redis.call('HGETALL', KEYS[1])
  local cur = {}
  for i = 1, #flat, 2 do
    cur[flat[i]] = flat[i + 1]
  end
  local cur_id, cur_version = tonumber(cur.id), tonumber(cur.version)
  if cur_id then
    if cur_id > id then
      return {0, 0}
    end
    if cur_id == id and cur_version then
      if cur_version > version then
        return {0, 0}
      end
      if cur_version == version and (tonumber(cur.synced_us) or 0) >= taken then
        return {0, 0}
      end
    end
    local same = true
    for i = 5, #ARGV, 2 do
      if cur[ARGV[i]] ~= ARGV[i + 1] then
        same = false
        break
      end
    end
    if same then
      return {0, 0}
    end
  end
  redis.call('DEL', KEYS[1])
  local fields = {'synced_us', ARGV[4]}
  for i = 5, #ARGV do
    fields[#fields + 1] = ARGV[i]
  end
  redis.call('HSET', KEYS[1], unpack(fields))
  local limits = 0
  if cur_id then
    for i = 5, #ARGV, 2 do
      local f = ARGV[i]
      if (f == 'max_permits' or f == 'rate') and tonumber(cur[f]) ~= tonumber(ARGV[i + 1]) then
        limits = 1
      end
    end
  end
  return {1, limits}
end

if op == 'del' then
  local cur = redis.call('HMGET', KEYS[1], 'id', 'updated_us')
  local cur_id, cur_updated = tonumber(cur[1]), tonumber(cur[2])
  local snapshot_us, max_id = tonumber(ARGV[2]), tonumber(ARGV[3])
  if cur_id and cur_id <= max_id and cur_updated and cur_updated < snapshot_us then
    redis.call('DEL', KEYS[1])
    return {1}
  end
  return {0}
end

return redis.error_reply('sync.lua: unknown operation ' .. tostring(op))
