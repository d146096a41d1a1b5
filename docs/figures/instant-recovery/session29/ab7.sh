#!/bin/bash
# pool2 (committed 9ca8902) vs settle (+ three empty commits of the indexed log before the restore), 4 walkers, alternating
out=/tmp/s29/ab7
for round in 1 2; do
  for wl in read-only read-write; do
    for b in pool2 settle; do
      /tmp/laz-base instant-bench --server-exe /tmp/laz-$b --keys 5000000 --targets ailir --workloads $wl \
        --clients 200 --duration-s 20 --settle-s 15 --out $out/$b-$wl-$round 2>&1 | grep "ailir $wl" | sed "s/^/$b round=$round: /" >> $out/results.txt
      rm -rf $out/$b-$wl-$round/image-ailir
    done
  done
done
