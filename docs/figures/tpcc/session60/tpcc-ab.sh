#!/bin/bash
# usage: [W=warehouses T=threads] tpcc-ab.sh ROUNDS BIN... — TPC-C (default 1 warehouse / 1 thread), 10 s, --prefault-mib 2048, the
# binaries' order swapped every other round; prints txn/s per run, then per-binary medians.
# Rows go to $WORK (default /tmp/s60).
D=${WORK:-/tmp/s60}; mkdir -p $D; R=$1; shift; out=$D/tpcc-ab.$$.txt; : > $out
for r in $(seq $R); do
  bins=("$@"); if [ $((r % 2)) = 0 ]; then bins=(); for b in "$@"; do bins=("$b" "${bins[@]}"); done; fi
  for b in "${bins[@]}"; do
    t=$($b bench --workload tpcc --warehouses ${W:-1} --threads ${T:-1} --duration-s 10 --prefault-mib 2048 2>&1 | awk '/^throughput/ {print $2}')
    echo "round $r bin $(basename $b) txn/s $t" | tee -a $out
  done
done
python3 - $out <<'PY'
import sys,statistics as st,collections
d=collections.defaultdict(list)
for l in open(sys.argv[1]):
    f=l.split(); d[f[3]].append(float(f[5]))
for b,v in d.items(): print(b, "median %.0f" % st.median(v), "runs", " ".join("%.0f" % x for x in v))
PY
