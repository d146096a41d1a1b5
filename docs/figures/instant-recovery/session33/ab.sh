#!/bin/bash
# ab.sh OUT ROUNDS "bin1 bin2 ..." extra-args (WORK: the directory of the binaries and runs, default /tmp/s33; session 34 ran it with WORK=/tmp/s34): alternating instant-bench runs (driver laz-drv) per server build
out=$1; rounds=$2; bins=$3; shift 3
for r in $(seq 1 $rounds); do for b in $bins; do
  ${WORK:-/tmp/s33}/laz-drv instant-bench --server-exe ${WORK:-/tmp/s33}/$b --keys 5000000 --targets ailir --workloads ${WL:-read-only} \
    --clients 200 --duration-s 15 --settle-s 15 "$@" --out ${WORK:-/tmp/s33}/run-$b 2>&1 | grep "ailir.*first reply" | sed "s/^/$b round $r: /"
  rm -rf ${WORK:-/tmp/s33}/run-$b/image-*
done; done | tee -a $out
