#!/bin/bash
# abkey.sh BASE NEW ROUNDS OUT ARGS...: alternating `lazarus bench ARGS` runs of two lazarus
# binaries (base first in odd rounds, new first in even ones); prints each run's throughput line.
BASE=$1; NEW=$2; R=$3; OUT=$4; shift 4
for r in $(seq 1 "$R"); do
  if [ $((r % 2)) -eq 1 ]; then order="base new"; else order="new base"; fi
  for v in $order; do
    if [ "$v" = base ]; then bin=$BASE; else bin=$NEW; fi
    "$bin" bench "$@" > "$OUT.$v.$r.log" 2>&1
    echo "$v $r: $(grep -iE "committed|txn/s" "$OUT.$v.$r.log" | head -2 | tr '\n' ' ')"
  done
done
