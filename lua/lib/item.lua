  --[[
  lua/lib/item.lua - phase 1's checks of item i (`it`, read from ARGV at
  `at` by the script, which knows its fields): its policy index and
  permits (a whole number >= 1), its policy's limits (policy(j), the
  script's own: nil when max_permits or P1, the script's name of the
  policy's p1, is not >= 1), each refused with an error naming SCRIPT and
  the bad values; then the item is kept (items[i]) and, on take and all,
  the record of its request id read (records: record key -> the stored
  RECORD or false), before any write. The record key is the state key ..
  "\x1f" .. "r" .. request_id (lua/bucket.lua's header).
  ]]
  if not it.j or not it.want or it.want < 1 or it.want ~= floor(it.want) then
    return redis.error_reply(SCRIPT .. ': item ' .. i .. ' has policy "' ..
                             tostring(ARGV[at]) .. '" and permits "' .. tostring(ARGV[at + 1]) ..
                             '" (a policy index and a whole number >= 1)')
  end
  it.p = policy(it.j)
  if not it.p then
    local pa = 4 + 4 * (it.j - 1)
    return redis.error_reply(SCRIPT .. ': policy ' .. it.j .. ' has max_permits "' ..
                             tostring(ARGV[pa + 1]) .. '" and ' .. P1 .. ' "' ..
                             tostring(ARGV[pa + 2]) .. '" (both whole numbers >= 1)')
  end
  items[i] = it
  if (mode == 'take' or mode == 'all') and it.rid ~= '' then
    it.rkey = it.key .. '\31r' .. it.rid
    if records[it.rkey] == nil then
      records[it.rkey] = redis.call('GET', it.rkey) or false
    end
  end
