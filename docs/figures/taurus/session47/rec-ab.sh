#!/bin/bash
# usage: rec-ab.sh ROUNDS LOGDIR BIN... [-- EXTRA RECOVER FLAGS]
# taurus-data (or serial-data) recovery of LOGDIR/d0,d1 on 2 threads, cold, a fresh copy each run,
# binaries alternating. Prints generation 1's read, graph and replay ms, its txn/s without and
# with reading, the index rebuild and the total, then per-binary medians. Scratch: $WORK.
W=${WORK:-/tmp/s47}; mkdir -p $W; R=$1; L=$2; shift 2
bins=(); while [ $# -gt 0 ] && [ "$1" != "--" ]; do bins+=("$1"); shift; done; [ "$1" = "--" ] && shift
out=$W/rec-ab.$$.txt; : > $out
dirs=$(ls -d $L/d* | sed "s|$L|$W/w|" | sed 's/^/--log-dir /' | tr '\n' ' ')
for r in $(seq $R); do for b in "${bins[@]}"; do
  rm -rf $W/w && cp -r $L $W/w
  o=$($b recover $dirs --threads 2 --cold "$@" 2>&1)
  g=$(echo "$o" | grep "  generation 1" | sed -E 's/.*read ([0-9.]+) ms, graph ([0-9.]+) ms, replay ([0-9.]+) ms, ([0-9]+) txn\/s \(([0-9]+) with reading.*/\1 \2 \3 \4 \5/')
  rb=$(echo "$o" | grep "^index rebuild" | awk '{print $3}')
  tot=$(echo "$o" | grep "^total" | awk '{print $2}')
  echo "round $r bin $(basename $b) read_graph_replay_txns_withread $g rebuild $rb total $tot" | tee -a $out
done; done
python3 - $out <<'PY'
import sys,statistics as st,collections
d=collections.defaultdict(list)
for l in open(sys.argv[1]):
    f=l.split(); d[f[3]].append([float(x) for x in f[5:10]]+[float(f[11]),float(f[13])])
for b,v in d.items():
    m=[st.median(x[i] for x in v) for i in range(7)]
    print(b, "median read %.1f graph %.1f replay %.1f txn/s %.0f with-reading %.0f rebuild %.1f total %.1f" % tuple(m))
PY
