# Object churn in Ruby: strings, arrays and hashes, most dying young, 20,000 kept and replaced;
# then a string buffer grown and dropped. ARGV[0]: the objects made.
n = (ARGV[0] || 400_000).to_i
keep = {}
n.times do |i|
  s = "item-#{i}-" * (1 + i % 7)
  a = [s, i, i.to_s, [i, i + 1]]
  keep[i % 20_000] = { name: s, idx: i, tags: a.map(&:to_s) }
  keep.delete(i % 20_011) if i % 3 == 0
end
buf = +""
(n / 2).times do |i|
  buf << i.to_s
  buf = +"" if buf.size > 100_000
end
puts keep.size
