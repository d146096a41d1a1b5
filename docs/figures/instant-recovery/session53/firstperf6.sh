#!/bin/bash
# firstperf6.sh BIN OUTDIR PERFOUT: six restarts (3 s each) of one preloaded image under perf record -a -g
set -uo pipefail
bin=$1; out=$2; perfout=$3; shift 3
rm -rf "$out"
"$bin" instant-bench --keys 5000000 --targets ailir --workloads read-only,read-only,read-only,read-only,read-only,read-only --clients 200 --duration-s 3 --settle-s 15 --out "$out" "$@" >"$perfout.bench.log" 2>&1 &
bench=$!
for _ in $(seq 1 30000); do
  grep -q "preloaded" "$perfout.bench.log" 2>/dev/null && break
  sleep 0.01
done
sleep 14
perf record -a -g -F 2999 -o "$perfout" -- sleep 60 >/dev/null 2>&1 &
pp=$!
wait $bench
kill -INT $pp; wait $pp
grep "first reply" "$perfout.bench.log"
