    --[[
    lua/lib/replay.lua - phase 2's answer for item i whose request id has
    a record (`rec`: kept by an earlier call, or by an earlier item of
    this one): that RECORD again, flags |= 1 (replayed), its lease id as
    it was; the item takes nothing (it.replayed).
    ]]
    local f = {unpack_struct(RECORD, rec)}
    f[10] = f[10] - f[10] % 2 + 1     -- flags |= 1: replayed
    out[i] = pack(RECORD, unpack(f)) .. string.sub(rec, 81)
    it.replayed = true
