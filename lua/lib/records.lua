  --[[
  lua/lib/records.lua - phase 3's request-id records: each item with a
  request id allowed now (status 0 and allowed: not a replay, not an
  error, which permitd asks again, not a denial, which took nothing, so
  that its retry is decided afresh and an over-limit client writes
  nothing) keeps its answer under its record key for ARGV[3] ms; two
  items of one call with the same id and key keep the first's.
  ]]
  if rid_ttl > 0 then
    for i = 1, n do
      local it = items[i]
      if it.rkey and not it.replayed and it.status == 0 and not records[it.rkey] and
         select(2, unpack_struct('<dd', out[i])) == 1 then
        records[it.rkey] = true
        redis.call('SET', it.rkey, out[i], 'PX', format('%d', rid_ttl))
      end
    end
  end
