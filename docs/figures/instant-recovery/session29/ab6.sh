#!/bin/bash
# final vs pool (a sleeping fetch thread woken only when the queue has 8 per running one), 4 walkers, alternating
out=/tmp/s29/ab6
for round in 1 2; do
  for wl in read-only read-write; do
    for b in final pool; do
      /tmp/laz-base instant-bench --server-exe /tmp/laz-$b --keys 5000000 --targets ailir --workloads $wl \
        --clients 200 --duration-s 20 --settle-s 15 --out $out/$b-$wl-$round 2>&1 | grep "ailir $wl" | sed "s/^/$b round=$round: /" >> $out/results.txt
      rm -rf $out/$b-$wl-$round/image-ailir
    done
  done
done
