#!/bin/bash
# Alternating runs after an idle pause (freed pages reported back to the host first).
for r in 1 2 3; do for mb in 0 2048; do
  sleep 25
  perf record -F 1000 -o cold-$mb-$r.data ${LAZARUS:-target/release/lazarus} bench --workload tpcc --warehouses 1 --threads 1 --duration-s 10 --prefault-mib $mb > cold-$mb-$r.txt 2>&1
  tp=$(grep throughput cold-$mb-$r.txt | awk '{print $2}')
  pf=$(grep prefaulted cold-$mb-$r.txt)
  share=$(perf report -i cold-$mb-$r.data --time 20%-85% --no-children --sort symbol --stdio 2>/dev/null | grep clear_page_erms | head -1 | awk '{print $1}')
  echo "round $r prefault_mib $mb txn/s $tp clear_page(20-85%) $share $pf"
done; done
