#!/bin/bash
# ab37.sh ROUNDS OUTPREFIX: alternating old/new instant-bench runs with the startup trace.
for r in $(seq 1 $1); do
  for v in old new; do
    bin=/tmp/s37/lz-trace; [ $v = new ] && bin=/tmp/s37/lz-new
    LAZARUS_STARTUP_TRACE=1 $bin instant-bench --keys 5000000 --targets ailir --workloads read-only --duration-s 15 --settle-s 15 --out /tmp/s37/ab > $2.$v.$r.log 2>&1
    rm -rf /tmp/s37/ab/image-*
  done
done
