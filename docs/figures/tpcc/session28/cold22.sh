#!/bin/bash
# TPC-C 2 warehouses / 2 threads, alternating without and with --prefault-mib, each after 25 s idle.
for r in 1 2 3; do for mb in 0 3072; do
  sleep 25
  t=$(${LAZARUS:-target/release/lazarus} bench --workload tpcc --warehouses 2 --threads 2 --duration-s 10 --prefault-mib $mb 2>&1 | grep -E "throughput|prefaulted" | tr '\n' ' ')
  echo "round $r prefault_mib $mb $t"
done; done
