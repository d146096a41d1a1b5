#!/bin/bash
# new build, walkers alternating
wl=${WL:-read-only}
for r in $(seq 1 ${ROUNDS:-2}); do
  for w in ${WALKERS:-4 3 2}; do
    /tmp/s31/laz-new instant-bench --keys 5000000 --targets ailir --workloads $wl --clients 200 --duration-s 15 --settle-s 15 \
      --restore-walkers $w --out /tmp/s31/abw > /tmp/s31/abw.txt 2>&1
    echo "round $r walkers $w $(grep 'first reply' /tmp/s31/abw.txt | head -1)"
    rm -rf /tmp/s31/abw/image-ailir
  done
done
