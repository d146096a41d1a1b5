#!/bin/bash
# Alternating: base (A) and the inline Value::clone build (B); TPC-C W warehouses / T threads, 10 s.
W=${W:-1}; T=${T:-1}
for r in 1 2 3 4; do for b in ${A:-target/release/lazarus} ${B:-/path/to/other/lazarus}; do
  t=$($b bench --workload tpcc --warehouses $W --threads $T --duration-s 10 --prefault-mib 1500 2>&1 | grep throughput | awk '{print $2}')
  echo "round $r $(basename $b) $W/$T $t"
done; done
