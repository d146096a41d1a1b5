#!/bin/bash
# ab3.sh ROUNDS OUT BIN... -- ARGS: rotate the binaries each round
R=$1; OUT=$2; shift 2; bins=(); while [ "$1" != "--" ]; do bins+=("$1"); shift; done; shift
n=${#bins[@]}
for r in $(seq 1 $R); do
  for k in $(seq 0 $((n-1))); do
    i=$(( (k + r) % n )); b=${bins[$i]}
    "$b" bench "$@" > "$OUT.$i.$r.log" 2>&1
    echo "$(basename $b) $r: $(grep -E "^throughput" "$OUT.$i.$r.log") SL $(grep stock-level "$OUT.$i.$r.log" | awk '{print $(NF-1)}') NO $(grep new-order "$OUT.$i.$r.log" | awk '{print $(NF-1)}') D $(grep delivery "$OUT.$i.$r.log" | awk '{print $(NF-1)}')"
  done
done
