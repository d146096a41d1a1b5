#!/bin/bash
# on-demand chunk size: 32 / 4 / 1 (all with the Indexer paused during the walk), 4 walkers, alternating
out=/tmp/s29/ab2
for round in 1 2 3; do
  for b in pause pause-c4 pause-c1; do
    /tmp/laz-base instant-bench --server-exe /tmp/laz-$b --keys 5000000 --targets ailir --workloads read-write \
      --clients 200 --duration-s 20 --settle-s 15 --out $out/$b-$round 2>&1 | grep "ailir read-write" | sed "s/^/$b round=$round: /" >> $out/results.txt
    rm -rf $out/$b-$round/image-ailir
  done
done
