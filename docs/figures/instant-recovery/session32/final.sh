#!/bin/bash
# The standing of issue 7 with the session's final build (laz-b3), the new driver; then Redis.
out=/tmp/s32/final.txt
for r in 1 2; do
  ./ab.sh $out 1 "laz-b3"
  ./ab.sh $out 1 "laz-b3" --restore-walkers 2
done
WL=read-write ./ab.sh $out 1 "laz-b3"
WL=read-write ./ab.sh $out 1 "laz-b3" --restore-walkers 2
for wl in read-only read-write; do
  /tmp/s32/laz-drv instant-bench --keys 5000000 --targets redis-everysec --workloads $wl --clients 200 --duration-s 15 --settle-s 15 --out /tmp/s32/redis-$wl 2>&1 | grep "redis.*first reply" | tee -a $out
  rm -rf /tmp/s32/redis-$wl/image-*
done
