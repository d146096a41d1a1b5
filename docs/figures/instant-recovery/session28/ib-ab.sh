#!/bin/bash
# instant-bench, AILIR under the 50:50 load: builds base / thp, restore walkers 4 (default) / 2.
for r in 1 2; do for cfg in "base 4" "thp 4" "thp 2"; do
  set -- $cfg
  rm -rf run-$1-$2-$r
  ${LAZARUS:-target/release/lazarus} instant-bench --server-exe /tmp/lazarus-$1 --keys 5000000 --targets ailir --workloads read-write \
     --clients 200 --duration-s 20 --settle-s 15 --restore-walkers $2 --out run-$1-$2-$r 2>&1 | grep "ailir read-write" | sed "s/^/round $r build $1 walkers $2: /"
done; done
