  --[[
  lua/lib/inspect.lua - mode "inspect"'s answer begins (each script's
  header): r, a table whose first ten numbers are item 1's RECORD's; the
  script adds what its layout shows after them.
  ]]
  local f, r = {unpack_struct(RECORD, out[1])}, {}
  for x = 1, 10 do
    r[x] = f[x]
  end
