#!/bin/sh
# The git-test-suite-like case: a shell script that starts 2,000 short processes (500 rounds of
# four small text tools, each allocating a little), as builds and test suites do. Run it with the
# allocator in LD_PRELOAD: every process inherits it. Prints a checksum so a broken run shows.
i=0
sum=0
while [ $i -lt 500 ]; do
  n=$(printf 'b %s\na %s\nc %s\n' $i $i $i | sort | sed -e 's/a/x/' | grep -c x)
  w=$(echo "round $i of the script" | wc -w)
  sum=$((sum + n + w))
  i=$((i + 1))
done
echo "$sum"
