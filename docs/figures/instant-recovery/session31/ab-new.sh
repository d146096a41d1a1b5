#!/bin/bash
# base vs gate-skip build, alternating; each build drives itself
wl=${WL:-read-only}
for r in $(seq 1 ${ROUNDS:-3}); do
  for b in base new; do
    exe=/tmp/s31/laz-$b
    $exe instant-bench --keys 5000000 --targets ailir --workloads $wl --clients 200 --duration-s 15 --settle-s 15 \
      --out /tmp/s31/abn > /tmp/s31/abn.txt 2>&1
    echo "round $r $b $(grep 'first reply' /tmp/s31/abn.txt | head -1)"
    cp /tmp/s31/abn/$wl-ailir.csv /tmp/s31/abn-tl-$wl-$b-round$r.csv
    rm -rf /tmp/s31/abn/image-ailir
  done
done
