#!/bin/bash
# usage: rec-ab.sh ROUNDS LOGDIR BIN... — taurus-data recovery of LOGDIR/d0,d1 on 2 threads, cold,
# fresh copy each run, the binaries' order swapped every other round; prints generation 1's
# read, graph and replay ms, graph + replay txn/s and txn/s with reading, then per-binary medians.
# Scratch directory: $WORK (default /tmp/s60).
W=${WORK:-/tmp/s60}; mkdir -p $W; R=$1; L=$2; shift 2
out=$W/rec-ab.$$.txt; : > $out
for r in $(seq $R); do
  bins=("$@"); if [ $((r % 2)) = 0 ]; then bins=(); for b in "$@"; do bins=("$b" "${bins[@]}"); done; fi
  for b in "${bins[@]}"; do
    rm -rf $W/w && cp -r $L $W/w
    o=$($b recover --log-dir $W/w/d0 --log-dir $W/w/d1 --threads 2 --cold 2>&1)
    g=$(echo "$o" | grep "  generation 1" | sed -E 's/.*read ([0-9.]+) ms, graph ([0-9.]+) ms, replay ([0-9.]+) ms, ([0-9]+) txn\/s \(([0-9]+) with reading.*/\1 \2 \3 \4 \5/')
    echo "round $r bin $(basename $b) read_graph_replay_txns_withread $g" | tee -a $out
  done
done
python3 - $out <<'PY'
import sys,statistics as st,collections
d=collections.defaultdict(list)
for l in open(sys.argv[1]):
    f=l.split(); d[f[3]].append([float(x) for x in f[5:10]])
for b,v in d.items():
    print(b, "median read %.1f graph %.1f replay %.1f txn/s %.0f with reading %.0f" % tuple(st.median(x[i] for x in v) for i in range(5)))
PY
