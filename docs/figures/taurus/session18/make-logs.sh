#!/bin/bash
# The logs of docs/PERFORMANCE.md, "Taurus", "Session 18": a 0.2 s load (generation 0), then a
# 4 s run (generation 1), 2 workers. usage: make-logs.sh LAZARUS_BIN
B=$1
for w in ycsb tpcc; do
  case $w in
    ycsb) W="--workload ycsb --variant taurus --records 200000"; p=y ;;
    tpcc) W="--workload tpcc --warehouses 2 --mix new-order,payment"; p=t ;;
  esac
  rm -rf ${p}l ${p}s
  $B bench $W --threads 2 --duration-s 0.2 --durability taurus-data --log-dir ${p}l/d0 --log-dir ${p}l/d1 --loggers 2 --fresh
  $B bench $W --threads 2 --duration-s 4 --durability taurus-data --log-dir ${p}l/d0 --log-dir ${p}l/d1 --loggers 2 --resume
  $B bench $W --threads 2 --duration-s 0.2 --durability serial-data --log-dir ${p}s/d0 --fresh
  $B bench $W --threads 2 --duration-s 4 --durability serial-data --log-dir ${p}s/d0 --resume
done
