#!/bin/bash
# Instructions per request of a fixed-work `lazarus bench` run, under callgrind (repeatable to
# about 0.01 % on this machine, where wall-clock A/B runs spread by 5-10 %). docs/PERFORMANCE.md,
# "TPC-C", "Session 40".
#
# usage: scripts/bench-instructions.sh OUT_DIR REQUESTS BIN [BIN...] -- [lazarus bench args]
#   e.g. scripts/bench-instructions.sh /tmp/cg 5000 /tmp/base /tmp/new -- --workload tpcc --warehouses 1
# Each BIN runs `bench --threads 1 --requests-per-thread REQUESTS --hash-seed 7 --duration-s 3600
# ARGS` once, collecting only inside the driver's attempts (the load is not counted); prints
# BIN, instructions, instructions per request. The callgrind files stay in OUT_DIR.
set -euo pipefail
out=$1
requests=$2
shift 2
bins=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
  bins+=("$1")
  shift
done
[ $# -gt 0 ] && shift
mkdir -p "$out"
for i in "${!bins[@]}"; do
  bin=${bins[$i]}
  file="$out/bench-$i.out"
  valgrind --tool=callgrind --callgrind-out-file="$file" --toggle-collect='lazarus::bench::driver::attempt*' \
    "$bin" bench --threads 1 --requests-per-thread "$requests" --hash-seed 7 --duration-s 3600 "$@" \
    >"$out/bench-$i.log" 2>&1
  total=$(callgrind_annotate --auto=no --threshold=100 "$file" | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}')
  awk -v b="$bin" -v t="$total" -v r="$requests" 'BEGIN { printf "%s\t%s\t%.0f\n", b, t, t / r }'
done
