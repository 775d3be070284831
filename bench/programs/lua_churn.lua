-- Lua's allocation patterns, one per mode (every Lua allocation is a realloc, every free one too):
--   trees:   binary trees built and dropped (the benchmarks game's binary-trees), small tables;
--   tables:  a 50,000-key table whose values are replaced, each a new table and a new string;
--   strings: strings formatted and joined into one growing buffer (many sizes up to MiBs).
local mode, scale = arg[1] or "trees", tonumber(arg[2]) or 1

if mode == "trees" then
  local function make(d) if d == 0 then return {} end d = d - 1 return { make(d), make(d) } end
  local function check(t) if t[1] then return 1 + check(t[1]) + check(t[2]) else return 1 end end
  local n = math.floor(15 + scale)
  local long, total = make(n), 0
  for d = 4, n, 2 do
    for _ = 1, 1 << (n - d + 4) do total = total + check(make(d)) end
  end
  print(total, check(long))
elseif mode == "tables" then
  local m = {}
  for i = 1, math.floor(1200000 * scale) do m["k" .. (i % 50000)] = { i, tostring(i) } end
  print(m.k1[1])
elseif mode == "strings" then
  local parts = {}
  for _ = 1, math.floor(5 * scale) do
    for i = 1, 200000 do
      parts[#parts + 1] = string.format("%d:%s", i, tostring(i * 3.5))
      if #parts > 5000 then parts = { table.concat(parts, ",") } end
    end
  end
  print(#parts[1])
else
  error("mode: trees, tables or strings")
end
