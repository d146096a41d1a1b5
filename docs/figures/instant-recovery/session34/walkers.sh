#!/bin/bash
out=$1; rounds=$2; ws=$3
for r in $(seq 1 $rounds); do for w in $ws; do
  /tmp/s34/laz-drv instant-bench --server-exe /tmp/s34/base-bin --keys 5000000 --targets ailir --workloads ${WL:-read-only} \
    --clients 200 --duration-s 15 --settle-s 15 --restore-walkers $w --out /tmp/s34/run-w 2>&1 | grep "ailir.*first reply" | sed "s/^/walkers $w round $r: /"
  rm -rf /tmp/s34/run-w/image-*
done; done | tee -a $out
