#!/bin/bash
# Two builds alternating, each driving itself; BUILDS names /tmp/s31/laz-<name> binaries.
# Run as: BUILDS="base gate" ./ab-gate.sh (ab-gate-*.txt), BUILDS="base new" ./ab-gate.sh (ab-new.txt)
wl=${WL:-read-only}
for r in $(seq 1 ${ROUNDS:-3}); do
  for b in ${BUILDS:-base gate}; do
    exe=/tmp/s31/laz-$b
    $exe instant-bench --keys 5000000 --targets ailir --workloads $wl --clients 200 --duration-s 15 --settle-s 15 \
      --out /tmp/s31/ab-$b > /tmp/s31/ab-$b.txt 2>&1
    echo "round $r $b $(grep 'first reply' /tmp/s31/ab-$b.txt | head -1)"
    cp /tmp/s31/ab-$b/$wl-ailir.csv /tmp/s31/ab-tl-$wl-$b-round$r.csv
    rm -rf /tmp/s31/ab-$b/image-ailir
  done
done
