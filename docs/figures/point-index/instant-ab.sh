#!/bin/bash
# AILIR under load after a crash, 5 M keys: two server builds alternating under the same driver
# (the new build drives, as in the recorded runs; each run starts from its own preload and crash image).
#   usage: instant-ab.sh BASE_BIN NEW_BIN ROUNDS OUT_DIR
set -euo pipefail
base=$1; new=$2; rounds=$3; out=$4
for r in $(seq 1 "$rounds"); do
  if [ $((r % 2)) = 1 ]; then order="base new"; else order="new base"; fi
  for which in $order; do
    bin=$base; [ "$which" = new ] && bin=$new
    dir=$out/$r-$which
    "$new" instant-bench --keys 5000000 --targets ailir --workloads read-write --clients 200 --duration-s 30 \
      --settle-s 15 --server-exe "$bin" --out "$dir" > "$dir.log" 2>&1
    echo "$r $which $(grep 'read-write: first' "$dir.log")"
  done
done
