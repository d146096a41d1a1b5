#!/bin/bash
# AILIR under load, walkers 1 vs 4 (LZ_WALKERS, experiment build), alternating
bin=/work/data/s22/lz-walkers
for r in 1 2; do
  if [ $r = 1 ]; then order="1 4"; else order="4 1"; fi
  for w in $order; do
    dir=/work/data/s22/walk/$r-w$w
    LZ_WALKERS=$w "$bin" instant-bench --keys 5000000 --targets ailir --workloads read-write --clients 200 --duration-s 30 \
      --settle-s 15 --server-exe "$bin" --out "$dir" > "$dir.log" 2>&1
    echo "$r walkers=$w $(grep 'read-write: first' "$dir.log")"
  done
done
