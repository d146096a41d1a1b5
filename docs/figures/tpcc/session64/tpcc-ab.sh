#!/bin/bash
# usage: [W=warehouses T=threads WORK=dir] tpcc-ab.sh ROUNDS BIN... — TPC-C (default 1 warehouse /
# 1 thread), 10 s, --prefault-mib 2048, the binaries' order swapped every other round; prints
# txn/s and the delivery, stock-level and new-order p50s per run, then per-binary medians.
D=${WORK:-/tmp/s64}; mkdir -p $D; R=$1; shift; out=$D/tpcc-ab.$$.txt; : > $out
for r in $(seq $R); do
  bins=("$@"); if [ $((r % 2)) = 0 ]; then bins=(); for b in "$@"; do bins=("$b" "${bins[@]}"); done; fi
  for b in "${bins[@]}"; do
    o=$($b bench --workload tpcc --warehouses ${W:-1} --threads ${T:-1} --duration-s 10 --prefault-mib 2048 2>&1)
    t=$(echo "$o" | awk '/^throughput/ {print $2}')
    p() { echo "$o" | awk -v k="$1" '$1==k {for(i=1;i<=NF;i++) if($i=="p50") print $(i+1)}'; }
    echo "round $r bin $(basename $b) txn/s $t delivery $(p delivery) stock-level $(p stock-level) new-order $(p new-order)" | tee -a $out
  done
done
python3 - $out <<'PY'
import sys,statistics as st,collections
d=collections.defaultdict(lambda: collections.defaultdict(list))
for l in open(sys.argv[1]):
    f=l.split()
    for k in range(4,len(f),2): d[f[3]][f[k]].append(float(f[k+1]))
for b,m in d.items():
    print(b, " ".join("%s median %.0f" % (k, st.median(v)) for k,v in m.items()), "runs", " ".join("%.0f" % x for x in m["txn/s"]))
PY
