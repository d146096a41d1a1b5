#!/bin/bash
# Batch graph against the streaming graph (Algorithms 4-6), alternating, on fresh copies of the
# same logs (docs/figures/taurus/session18/make-logs.sh: yl = YCSB taurus-data, tl = TPC-C
# taurus-data, 2 loggers each), page cache evicted (--cold). Usage: streaming-ab.sh LAZARUS ROUNDS
set -euo pipefail
B=$1
for round in $(seq 1 "$2"); do
  for log in yl tl; do
    for mode in batch streaming; do
      flag=""
      [ $mode = streaming ] && flag=--streaming-graph
      rm -rf /tmp/rc && cp -r $log /tmp/rc
      res=$({ /usr/bin/time -f "TIME %e %M" "$B" recover --log-dir /tmp/rc/d0 --log-dir /tmp/rc/d1 --threads 2 \
        --cold --from-generation 1 $flag; } 2>&1)
      g1=$(echo "$res" | grep "generation 1" | sed 's/.*recovered/recovered/')
      tot=$(echo "$res" | grep "^total" | awk '{print $2}')
      echo "$round $log $mode total_ms=$tot $(echo "$res" | grep TIME) | $g1"
    done
  done
done
