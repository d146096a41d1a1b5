#!/bin/bash
# base vs final on read-only and write-only, 4 walkers, alternating
out=/tmp/s29/ab4
for round in 1 2; do
  for wl in read-only write-only; do
    for b in base final; do
      /tmp/laz-base instant-bench --server-exe /tmp/laz-$b --keys 5000000 --targets ailir --workloads $wl \
        --clients 200 --duration-s 20 --settle-s 15 --out $out/$b-$wl-$round 2>&1 | grep "ailir $wl" | sed "s/^/$b round=$round: /" >> $out/results.txt
      rm -rf $out/$b-$wl-$round/image-ailir
    done
  done
done
