#!/bin/bash
# docs/PERFORMANCE.md, "Taurus", "Session 24": CPU per committed transaction of a taurus-data run
# (TPC-C new-order + payment, 2 warehouses, 2 workers, 2 loggers, 6 s), binaries interleaved.
# usage: logging-cpu.sh ROUNDS BIN... -> rows: round binary txn/s user_s sys_s
R=$1; shift
W="--workload tpcc --warehouses 2 --mix new-order,payment"
for r in $(seq 1 "$R"); do
  for b in "$@"; do
    rm -rf td
    "$b" bench $W --threads 2 --duration-s 0.2 --durability taurus-data --log-dir td/d0 --log-dir td/d1 --loggers 2 --fresh >/dev/null 2>&1
    out=$( { /usr/bin/time -f "TIME %U %S" "$b" bench $W --threads 2 --duration-s 6 --durability taurus-data \
            --log-dir td/d0 --log-dir td/d1 --loggers 2 --resume; } 2>&1)
    echo "$r $(basename "$b") $(echo "$out" | awk '/^throughput/{print $2}') $(echo "$out" | awk '/^TIME/{print $2, $3}')"
  done
done
