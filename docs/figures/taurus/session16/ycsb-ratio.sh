#!/bin/bash
# usage: ycsb-ratio.sh BIN ROUNDS -> rows: round config txn/s (YCSB Taurus variant, 2 workers, 6 s)
b=$1; W="--workload ycsb --variant taurus --records 200000"
for r in $(seq 1 $2); do
  echo "$r none $(./$b bench $W --threads 2 --duration-s 6 --durability none 2>&1 | awk '/^throughput/{print $2}')"
  for lg in 1 2 4; do
    rm -rf td; dirs=""; for i in $(seq 0 $((lg-1))); do dirs="$dirs --log-dir td/d$i"; done
    ./$b bench $W --threads 2 --duration-s 0.2 --durability taurus-data $dirs --loggers $lg --fresh >/dev/null 2>&1
    echo "$r td${lg}L $(./$b bench $W --threads 2 --duration-s 6 --durability taurus-data $dirs --loggers $lg --resume 2>&1 | awk '/^throughput/{print $2}')"
  done
done
