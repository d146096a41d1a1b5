#!/bin/bash
# rec-abba.sh ROUNDS LOGDIR A B: as session44/rec-ab.sh, but the order within a round swaps every
# round (A B, B A, ...), since on this VM the first run of a pair is often slower.
W=${WORK:-/tmp/s54/rw}; mkdir -p $W; R=$1; L=$2; A=$3; B=$4
out=$W/rec-abba.$$.txt; : > $out
for r in $(seq $R); do
  if [ $((r % 2)) = 1 ]; then order="$A $B"; else order="$B $A"; fi
  for b in $order; do
    rm -rf $W/w && cp -r $L $W/w
    o=$($b recover --log-dir $W/w/d0 --log-dir $W/w/d1 --threads 2 --cold 2>&1)
    g=$(echo "$o" | grep "  generation 1" | sed -E 's/.*graph ([0-9.]+) ms, replay ([0-9.]+) ms, ([0-9]+) txn.*/\1 \2 \3/')
    rb=$(echo "$o" | grep "^index rebuild" | awk '{print $3}')
    echo "round $r bin $(basename $b) graph_replay_txns $g rebuild $rb" | tee -a $out
  done
done
python3 - $out <<'PY'
import sys,statistics as st,collections
d=collections.defaultdict(list)
for l in open(sys.argv[1]):
    f=l.split(); d[f[3]].append((float(f[5]),float(f[6]),float(f[7]),float(f[9])))
for b,v in d.items():
    print(b, "median graph %.1f replay %.1f txn/s %.0f rebuild %.1f" % tuple(st.median(x[i] for x in v) for i in range(4)))
PY
