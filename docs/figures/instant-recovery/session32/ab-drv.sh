#!/bin/bash
# A/B of the load driver: the same server (laz-new), the old thread-per-client driver vs the new epoll one.
out=/tmp/s32/abdrv; mkdir -p $out
for round in ${ROUNDS:-1 2}; do
  for d in old new; do
    case $d in old) exe=/tmp/s32/laz-new;; new) exe=/tmp/s32/laz-drv;; esac
    $exe instant-bench --server-exe /tmp/s32/laz-new --keys 5000000 --targets ailir --workloads ${WL:-read-only} \
      --clients 200 --duration-s 15 --settle-s 15 "$@" --out $out/$d-$round 2>&1 | grep "ailir.*first reply" | sed "s/^/$d round $round: /"
    cp $out/$d-$round/*.csv $out/tl-$d-$round.csv 2>/dev/null; rm -rf $out/$d-$round/image-*
  done
done
