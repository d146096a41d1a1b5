#!/bin/bash
# usage: rec-ab.sh ROUNDS LOGDIR BIN... — taurus-data recovery of LOGDIR/d0,d1 on 2 threads, cold,
# fresh copy each run, binaries alternating; prints gen-1 graph/replay ms and txn/s, the index
# rebuild, then per-binary medians. Scratch directory: $WORK (default /tmp/s44).
# Session 54: SWAP=1 reverses the binaries' order every other round (on this VM a fixed order lets
# the machine's drift pass for a difference between builds); PAUSE_S=N sleeps N s before each run.
mkdir -p ${WORK:-/tmp/s44}; R=$1; L=$2; shift 2
out=${WORK:-/tmp/s44}/rec-ab.$$.txt; : > $out
for r in $(seq $R); do
  bins=("$@"); if [ "${SWAP:-0}" = 1 ] && [ $((r % 2)) = 0 ]; then bins=(); for b in "$@"; do bins=("$b" "${bins[@]}"); done; fi
  for b in "${bins[@]}"; do
  rm -rf ${WORK:-/tmp/s44}/w && cp -r $L ${WORK:-/tmp/s44}/w
  sleep "${PAUSE_S:-0}"
  o=$($b recover --log-dir ${WORK:-/tmp/s44}/w/d0 --log-dir ${WORK:-/tmp/s44}/w/d1 --threads 2 --cold 2>&1)
  g=$(echo "$o" | grep "  generation 1" | sed -E 's/.*graph ([0-9.]+) ms, replay ([0-9.]+) ms, ([0-9]+) txn.*/\1 \2 \3/')
  rb=$(echo "$o" | grep "^index rebuild" | awk '{print $3}')
  echo "round $r bin $(basename $b) graph_replay_txns $g rebuild $rb" | tee -a $out
done; done
python3 - $out <<'PY'
import sys,statistics as st,collections
d=collections.defaultdict(list)
for l in open(sys.argv[1]):
    f=l.split(); d[f[3]].append((float(f[5]),float(f[6]),float(f[7]),float(f[9])))
for b,v in d.items():
    print(b, "median graph %.1f replay %.1f txn/s %.0f rebuild %.1f" % tuple(st.median(x[i] for x in v) for i in range(4)))
PY
