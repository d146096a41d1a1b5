#!/bin/bash
# abw.sh ROUNDS OUT: old / new alternating, read-write and write-only, 5 M keys, 200 clients.
for r in $(seq 1 $1); do
  for wl in read-write write-only; do
    for v in old new; do
      bin=/tmp/s37/lz-trace; [ $v = new ] && bin=/tmp/s37/lz-final
      $bin instant-bench --keys 5000000 --targets ailir --workloads $wl --clients 200 --duration-s 15 --settle-s 15 --out /tmp/s37/abw 2>&1 | grep "instant-bench: ailir $wl" | sed "s/^/$v round $r: /"
      rm -rf /tmp/s37/abw/image-*
    done
  done
done
