#!/bin/bash
# share.sh OUT ROUNDS "s1 s2 ...": alternating instant-bench runs of base-bin at each walk CPU share, then Redis once
out=$1; rounds=$2; shares=$3
for r in $(seq 1 $rounds); do for s in $shares; do
  /tmp/s34/laz-drv instant-bench --server-exe /tmp/s34/base-bin --keys 5000000 --targets ailir --workloads ${WL:-read-only} \
    --clients 200 --duration-s 15 --settle-s 15 --restore-cpu-share $s --out /tmp/s34/run-share 2>&1 | grep "ailir.*first reply" | sed "s/^/share $s round $r: /"
  rm -rf /tmp/s34/run-share/image-*
done; done | tee -a $out
/tmp/s34/laz-drv instant-bench --keys 5000000 --targets redis-everysec --workloads ${WL:-read-only} \
    --clients 200 --duration-s 15 --settle-s 15 --out /tmp/s34/run-redis 2>&1 | grep "redis.*first reply" | tee -a $out
rm -rf /tmp/s34/run-redis/image-*
