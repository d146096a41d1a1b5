#!/bin/bash
# usage: perfload.sh BIN OUTDIR PERFOUT [extra instant-bench args]
# Runs instant-bench (5 M keys, read-only, 200 clients) and records every CPU (-a) for 8 s from the restart.
set -uo pipefail
bin=$1; out=$2; perfout=$3; shift 3
rm -rf "$out"
"$bin" instant-bench --keys 5000000 --targets ailir --workloads read-only --clients 200 --duration-s 15 --settle-s 15 --out "$out" "$@" >"$perfout.bench.log" 2>&1 &
bench=$!
for _ in $(seq 1 3000); do
  n=$(grep -c "listening on" "$perfout.bench.log" 2>/dev/null)
  [ "${n:-0}" -ge 2 ] && break
  sleep 0.05
done
perf record -a -g -F 999 -o "$perfout" -- sleep 8 >/dev/null 2>&1
wait $bench
tail -3 "$perfout.bench.log"
