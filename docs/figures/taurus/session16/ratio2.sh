#!/bin/bash
# usage: ratio2.sh BIN ROUNDS -> rows: round workload config txn/s (2 workers, 6 s)
b=$1
for r in $(seq 1 $2); do
  for w in ycsb tpcc; do
    case $w in ycsb) W="--workload ycsb --variant taurus --records 200000";; tpcc) W="--workload tpcc --warehouses 2 --mix new-order,payment";; esac
    echo "$r $w none $(./$b bench $W --threads 2 --duration-s 6 --durability none 2>&1 | awk '/^throughput/{print $2}')"
    for lg in 1 2 4; do
      rm -rf td; dirs=""; for i in $(seq 0 $((lg-1))); do dirs="$dirs --log-dir td/d$i"; done
      ./$b bench $W --threads 2 --duration-s 0.2 --durability taurus-data $dirs --loggers $lg --fresh >/dev/null 2>&1
      echo "$r $w td${lg}L $(./$b bench $W --threads 2 --duration-s 6 --durability taurus-data $dirs --loggers $lg --resume 2>&1 | awk '/^throughput/{print $2}')"
    done
  done
done
