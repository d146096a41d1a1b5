#!/usr/bin/env bash
# Side by side: taurus-cmd recovery, base vs new binary, alternating, 1 and 2 threads.
# Usage: rec.sh BASE NEW ROUNDS
set -u
base=$1 new=$2 rounds=${3:-3}
for r in $(seq 1 "$rounds"); do
  for w in cycsb ctpcc; do
    for t in 1 2; do
      for bin in base new; do
        exe=$base; [ $bin = new ] && exe=$new
        D=/work/data/$w; rm -rf $D; cp -a /work/data/$w.orig $D; sync
        line=$($exe recover --log-dir $D/d0 --log-dir $D/d1 --threads $t --cold --from-generation 1 2>&1 | grep -E "^  generation 1 ")
        rate=$(echo "$line" | grep -oE "[0-9]+ txn/s" | grep -oE "[0-9]+")
        graph=$(echo "$line" | grep -oE "graph [0-9.]+ ms" | grep -oE "[0-9.]+")
        replay=$(echo "$line" | grep -oE "replay [0-9.]+ ms" | grep -oE "[0-9.]+")
        printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$r" "$w" "$t" "$bin" "$rate" "$graph" "$replay" "$(cut -d' ' -f1 /proc/loadavg)"
      done
    done
  done
done
