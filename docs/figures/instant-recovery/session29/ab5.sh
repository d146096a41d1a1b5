#!/bin/bash
# walkers' nice 0 / 5 / 10 (LAZARUS_WALKER_NICE, experiment build laz-nice = final + setpriority), read-only and read-write, alternating
out=/tmp/s29/ab5
for round in 1 2; do
  for wl in read-only read-write; do
    for n in 0 5 10; do
      LAZARUS_WALKER_NICE=$n /tmp/laz-base instant-bench --server-exe /tmp/laz-nice --keys 5000000 --targets ailir --workloads $wl \
        --clients 200 --duration-s 20 --settle-s 15 --out $out/n$n-$wl-$round 2>&1 | grep "ailir $wl" | sed "s/^/nice=$n round=$round: /" >> $out/results.txt
      rm -rf $out/n$n-$wl-$round/image-ailir
    done
  done
done
