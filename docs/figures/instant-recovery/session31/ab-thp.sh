#!/bin/bash
wl=${WL:-read-only}
for r in $(seq 1 ${ROUNDS:-2}); do
  for t in 0 1; do
    LAZARUS_EXP_NO_THP=$t /tmp/s31/laz-thp instant-bench --keys 5000000 --targets ailir --workloads $wl --clients 200 --duration-s 15 --settle-s 15 \
      --out /tmp/s31/abt > /tmp/s31/abt.txt 2>&1
    echo "round $r nothp $t $(grep 'first reply' /tmp/s31/abt.txt | head -1)"
    cp /tmp/s31/abt/$wl-ailir.csv /tmp/s31/abt-tl-$wl-$t-round$r.csv
    rm -rf /tmp/s31/abt/image-ailir
  done
done
