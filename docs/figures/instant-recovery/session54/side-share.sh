#!/bin/bash
# side-share.sh ROUNDS OUT SHARE...: per round, one instant-bench of AILIR at each share beside Redis everysec (read-only)
rounds=$1; out=$2; shift 2
for r in $(seq 1 $rounds); do
  for s in "$@"; do
    d=/tmp/s54/ss-$s; rm -rf $d
    /tmp/s54/lz-c3 instant-bench --keys 5000000 --targets ailir,redis-everysec --workloads read-only --clients 200 \
      --duration-s 15 --settle-s 15 --restore-cpu-share $s --out $d > $d.log 2>&1
    echo "round $r share $s $(date +%H:%M:%S)" >> $out
    tail -2 $d/summary.csv >> $out
    rm -rf $d/image-*
  done
done
