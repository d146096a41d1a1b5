#!/bin/bash
# governor shares, alternating, both workloads, 2 rounds; then redis everysec once per workload
exe=/tmp/s30/laz-s30
for r in 1 2; do
  for wl in read-write read-only; do
    for share in 1 0.5 0.3; do
      $exe instant-bench --keys 5000000 --targets ailir --workloads $wl --clients 200 --duration-s 15 --settle-s 15 \
        --restore-cpu-share $share --out /tmp/s30/r3 > /tmp/s30/r3.txt 2>&1
      echo "round $r share $share $(grep 'first reply' /tmp/s30/r3.txt | head -1)"
      cp /tmp/s30/r3/$wl-ailir.csv /tmp/s30/r3-tl-$wl-share$share-round$r.csv
      rm -rf /tmp/s30/r3/image-ailir
    done
  done
done
$exe instant-bench --keys 5000000 --targets redis-everysec --workloads read-write,read-only --clients 200 --duration-s 15 --settle-s 15 --out /tmp/s30/r3redis > /tmp/s30/r3redis.txt 2>&1
grep 'first reply' /tmp/s30/r3redis.txt
rm -rf /tmp/s30/r3redis/image-*
