#!/usr/bin/env bash
# taurus-cmd TPC-C recovery, base vs new, alternating, 2 threads, cold, a fresh copy of LOGDIR
# (d0, d1) per run; prints round, build, generation-1 txn/s, replay ms.
# Usage: rec.sh BASE NEW ROUNDS LOGDIR
set -u
base=$1 new=$2 rounds=$3 logs=$4
for r in $(seq 1 "$rounds"); do
  for bin in base new; do
    exe=$base; [ $bin = new ] && exe=$new
    D=${SCRATCH:-/tmp/rec-scratch}; rm -rf $D; cp -a $logs $D; sync
    line=$($exe recover --log-dir $D/d0 --log-dir $D/d1 --threads 2 --cold --from-generation 1 2>&1 | grep -E "^  generation 1 ")
    rate=$(echo "$line" | grep -oE "[0-9]+ txn/s" | grep -oE "[0-9]+")
    replay=$(echo "$line" | grep -oE "replay [0-9.]+ ms" | grep -oE "[0-9.]+")
    printf '%s\t%s\t%s\t%s\n' "$r" "$bin" "$rate" "$replay"
  done
done
