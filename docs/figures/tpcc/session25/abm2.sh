#!/bin/bash
# usage: [A=BUILD_A] [B=BUILD_B] abm2.sh ROUNDS OUT BENCH_ARGS...
# Runs `lazarus bench BENCH_ARGS` with the two builds (files in the current directory; defaults
# lz-base, the build before the loop-key prefetch, and lz-pf, the build after), alternating, the
# one that goes first alternating too; writes "round build txn/s" rows to OUT and prints each
# build's rows and median.
A=${A:-lz-base}; B=${B:-lz-pf}
rounds=$1; out=$2; shift 2
: > $out
for r in $(seq 1 $rounds); do
  if [ $((r % 2)) = 1 ]; then order="$A $B"; else order="$B $A"; fi
  for b in $order; do
    line=$(./$b bench "$@" 2>&1 | awk '/^throughput/ {t=$2} /new-order/ {no=$NF} /stock-level/ {sl=$NF} END {print t}')
    echo "$r $b $line" >> $out
  done
done
python3 - "$out" $A $B <<'PY'
import sys, statistics
rows=[l.split() for l in open(sys.argv[1])]
for b in sys.argv[2:]:
    v=[int(r[2]) for r in rows if r[1]==b]
    print(b, v, 'median', statistics.median(v))
PY
