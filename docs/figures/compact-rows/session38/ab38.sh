#!/bin/bash
# ab38.sh ROUNDS OUTPREFIX [WORKLOAD]: alternating base/new instant-bench runs (5 M keys, 200 clients).
W=${3:-read-only}
for r in $(seq 1 $1); do
  for v in base new; do
    bin=/tmp/s38/bin/lz-$v
    $bin instant-bench --keys 5000000 --targets ailir --workloads $W --clients 200 --duration-s 15 --settle-s 15 --out /tmp/s38/ab > $2.$v.$r.log 2>&1
    grep -E "first reply" $2.$v.$r.log | head -1 | sed "s/^/$v $r: /"
    rm -rf /tmp/s38/ab/image-*
  done
done
