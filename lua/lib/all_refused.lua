  --[[
  lua/lib/all_refused.lua - the answers of an "all" call that is refused
  (nothing taken: every item's key is back to what it held, `never` and
  `errored` said by the script): an item's own answer stands when it is a
  replay or the error that refused the call; the others answer aborted
  (-10) when another item's error refused it, or when a key's items
  together can never pass but not its own key's; out_of_range (-11, the
  total in `remaining`) when its key's items together ask more than
  max_permits; else waiting(st, p), the script's own answer of a denial:
  nothing taken, retry_after_ms the longest wait of the call's keys.
  ]]
  for i = 1, n do
    local it = items[i]
    local st, p = states[it.key], it.p
    if it.replayed or it.status ~= 0 then
      -- its own answer stands (a replay, or the error that refused the call)
    elseif errored or (never and st.total <= p.max) then
      out[i] = pack(RECORD, ABORTED, 0, 0, p.max, 0, 0, 0, 0, 0, 0) .. NO_LEASE
      it.status = ABORTED
    elseif never then
      out[i] = pack(RECORD, OUT_OF_RANGE, 0, st.total, p.max, 0, 0, 0, 0, 0, 0) .. NO_LEASE
      it.status = OUT_OF_RANGE
    else
      out[i] = waiting(st, p)
    end
  end
