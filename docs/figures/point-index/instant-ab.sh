#!/bin/bash
# AILIR under load after a crash, 5 M keys: the server builds before and after the point index, alternating.
for r in 1 2; do
  if [ $r = 1 ]; then order="v1 new"; else order="new v1"; fi
  for b in $order; do
    out=/work/data/s20/ib/$r-$b
    ./lazarus-new instant-bench --keys 5000000 --targets ailir --workloads read-write --clients 200 --duration-s 30 --settle-s 15 --server-exe /work/data/s20/lazarus-$b --out $out > $out.log 2>&1
    echo "$r $b $(tail -3 $out.log | tr '\n' ' ')"
    rm -rf $out/images $out/*image* 2>/dev/null
  done
done
