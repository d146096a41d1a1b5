#!/bin/bash
# abtpcc.sh ROUNDS OUT ARGS...: alternating base/new lazarus bench runs, the throughput line of each.
R=$1; OUT=$2; shift 2
for r in $(seq 1 $R); do
  for v in base new; do
    /tmp/s38/bin/lz-$v bench "$@" > $OUT.$v.$r.log 2>&1
    echo "$v $r: $(grep -iE "committed|txn/s" $OUT.$v.$r.log | head -2 | tr '\n' ' ')"
  done
done
