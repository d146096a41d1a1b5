#!/bin/bash
# nice.sh OUT ROUNDS: alternating: driver and server at nice 0; driver at -10 with the server at 0
out=$1; rounds=$2
for r in $(seq 1 $rounds); do
  /tmp/s34/laz-drv instant-bench --server-exe /tmp/s34/base-bin --keys 5000000 --targets ailir --workloads ${WL:-read-only} \
    --clients 200 --duration-s 15 --settle-s 15 --out /tmp/s34/run-n 2>&1 | grep "ailir.*first reply" | sed "s/^/same priority round $r: /"
  rm -rf /tmp/s34/run-n/image-*
  nice -n -10 /tmp/s34/laz-drv instant-bench --server-exe /tmp/s34/nice-wrap --keys 5000000 --targets ailir --workloads ${WL:-read-only} \
    --clients 200 --duration-s 15 --settle-s 15 --out /tmp/s34/run-n 2>&1 | grep "ailir.*first reply" | sed "s/^/driver first round $r: /"
  rm -rf /tmp/s34/run-n/image-*
done | tee -a $out
