#!/bin/bash
# final.sh OUT ROUNDS "w:s ...": alternating instant-bench runs of BIN per (walkers, share), Redis everysec once per round
out=$1; rounds=$2; cfgs=$3
for r in $(seq 1 $rounds); do
  for c in $cfgs; do
    w=${c%%:*}; s=${c##*:}
    /tmp/s34/laz-drv instant-bench --server-exe ${BIN:-/tmp/s34/get-bin} --keys 5000000 --targets ailir --workloads ${WL:-read-only} \
      --clients 200 --duration-s 15 --settle-s 15 --restore-walkers $w --restore-cpu-share $s --out /tmp/s34/run-f 2>&1 | grep "ailir.*first reply" | sed "s/^/walkers $w share $s round $r: /"
    rm -rf /tmp/s34/run-f/image-*
  done
  if [ -n "${REDIS:-}" ]; then
    /tmp/s34/laz-drv instant-bench --keys 5000000 --targets redis-everysec --workloads ${WL:-read-only} \
      --clients 200 --duration-s 15 --settle-s 15 --out /tmp/s34/run-redis 2>&1 | grep "redis.*first reply" | sed "s/^/round $r: /"
    rm -rf /tmp/s34/run-redis/image-*
  fi
done | tee -a $out
