#!/bin/bash
# usage: silo-ab.sh ROUNDS W T LAZARUS_BIN — alternates Silo's dbtest (TPC-C, scale W, T threads,
# 10 s) and `lazarus bench` (same, --prefault-mib 2048), order swapped every other round.
R=$1; W=$2; T=$3; L=$4
S=/tmp/silo/src/out-perf.silotree/benchmarks/dbtest
silo() { (cd $(dirname $S) && ./dbtest --verbose --bench tpcc --db-type ndb-proto2 --num-threads $T --scale-factor $W --runtime 10 --bench-opts "--order-status-scan-hack" 2>&1) | awk '/agg_throughput/ {print $2}'; }
laz() { $L bench --workload tpcc --warehouses $W --threads $T --duration-s 10 --prefault-mib 2048 2>&1 | awk '/^throughput/ {print $2}'; }
for r in $(seq $R); do
  if [ $((r % 2)) = 1 ]; then a=$(silo); b=$(laz); else b=$(laz); a=$(silo); fi
  echo "round $r W $W T $T silo $a lazarus $b ratio $(python3 -c "print('%.3f' % ($b/$a))")"
done
