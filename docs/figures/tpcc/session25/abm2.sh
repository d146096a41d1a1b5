#!/bin/bash
A=${A:-lz-base}; B=${B:-lz-pf}
# usage: abm.sh ROUNDS OUT ARGS... : $A and $B alternating (the first alternates too)
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
