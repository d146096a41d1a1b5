#!/bin/bash
# base (chunk 32, Indexer runs) vs chunk 1 vs chunk 1 + Indexer paused during the walk; 4 walkers, alternating
out=/tmp/s29/ab3
for round in 1 2 3; do
  for b in base c1 pause-c1; do
    /tmp/laz-base instant-bench --server-exe /tmp/laz-$b --keys 5000000 --targets ailir --workloads read-write \
      --clients 200 --duration-s 20 --settle-s 15 --out $out/$b-$round 2>&1 | grep "ailir read-write" | sed "s/^/$b round=$round: /" >> $out/results.txt
    rm -rf $out/$b-$round/image-ailir
  done
done
