  --[[
  lua/lib/records.lua - phase 3's request-id records: each item with a
  request id decided now (status 0, allowed or denied alike: not a
  replay, not an error, which permitd asks again) keeps its answer under
  its record key for ARGV[3] ms; two items of one call with the same id
  and key keep the first's.
  ]]
  if rid_ttl > 0 then
    for i = 1, n do
      local it = items[i]
      if it.rkey and not it.replayed and it.status == 0 and not records[it.rkey] then
        records[it.rkey] = true
        redis.call('SET', it.rkey, out[i], 'PX', rid_ttl)
      end
    end
  end
