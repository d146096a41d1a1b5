#!/bin/bash
# An experiment build (not kept) gave the restore a SmallPages guard under --recovery-small-pages;
# /tmp/s45/serve-small ran that build as `lazarus ... --recovery-small-pages`.
# ab.sh ROUNDS: instant-bench read-only at 5 M keys, the server default (huge pages) against --recovery-small-pages
for r in $(seq $1); do for v in huge small; do
  if [ $v = small ]; then exe=/tmp/s45/serve-small; else exe=/tmp/laz-wsp; fi
  rm -rf out-$v-$r
  /tmp/laz-wsp instant-bench --server-exe $exe --keys 5000000 --targets ailir --workloads read-only --clients 200 --duration-s 15 --settle-s 15 --out out-$v-$r > log-$v-$r.txt 2>&1
  echo "round $r $v: $(grep -E '^ailir' log-$v-$r.txt)"
done; done
