#!/bin/bash
# ab.sh OUT ROUNDS "bin1 bin2 ...": alternating instant-bench read-only runs (defaults), one line per run
out=$1; rounds=$2; bins=$3
for r in $(seq 1 $rounds); do
  for b in $bins; do
    ${DRV:-/tmp/s35/lifo-bin} instant-bench --server-exe /tmp/s35/$b --keys 5000000 --targets ailir --workloads ${WL:-read-only} \
      --clients 200 --duration-s 15 --settle-s 15 ${EXTRA:-} --out /tmp/s35/run-ab 2>&1 | grep "ailir.*first reply" | sed "s/^/$b round $r: /"
    rm -rf /tmp/s35/run-ab/image-*
  done
done | tee -a $out
