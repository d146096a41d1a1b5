#!/bin/bash
# A/B: base vs Indexer paused during the walk; 4 and 2 walkers; alternating.
out=/tmp/s29/ab1
for round in 1 2; do
  for cfg in base:4 pause:4 base:2 pause:2; do
    b=${cfg%%:*}; w=${cfg##*:}
    /tmp/laz-base instant-bench --server-exe /tmp/laz-$b --keys 5000000 --targets ailir --workloads read-write \
      --clients 200 --duration-s 20 --settle-s 15 --restore-walkers $w --out $out/$b-$w-$round 2>&1 | grep "ailir read-write" | sed "s/^/$b walkers=$w round=$round: /" >> $out/results.txt
    rm -rf $out/$b-$w-$round/image-ailir
  done
done
