#!/bin/bash
# rwab.sh ROUNDS: read-write restores, start build vs final build, then Redis everysec.
for r in $(seq 1 $1); do
  for b in lz-base lz-final; do
    /tmp/s48/$b instant-bench --keys 5000000 --targets ailir --workloads read-write --clients 200 --duration-s 15 --settle-s 15 --out /tmp/s48/rw 2>&1 | grep -E "instant-bench: ailir read" | sed "s/^/round $r $b: /"
    rm -rf /tmp/s48/rw/image-*
  done
  /tmp/s48/lz-final instant-bench --keys 5000000 --targets redis-everysec --workloads read-write --clients 200 --duration-s 15 --settle-s 15 --out /tmp/s48/rw 2>&1 | grep -E "instant-bench: redis-everysec read" | sed "s/^/round $r redis: /"
  rm -rf /tmp/s48/rw/image-*
done
