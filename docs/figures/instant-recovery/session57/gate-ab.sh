#!/bin/bash
# gate-ab.sh ROUNDS OUT: instant-bench at its default --settle-s 2, the lag bound at 16 MiB
# (default) against none (--unindexed-max-mib 0), order swapped every round.
rounds=$1; out=$2; : > $out
for r in $(seq ${FIRST:-1} $rounds); do
  if [ $((r % 2)) -eq 1 ]; then order="${G:-16} 0"; else order="0 ${G:-16}"; fi
  for g in $order; do
    echo "### round $r gate $g $(date +%T)" >> $out
    ${BIN:-/tmp/s57/lz-gate} instant-bench --keys 5000000 --targets ailir --workloads read-only,read-write,write-only \
      --clients 200 --duration-s 15 --settle-s 2 --unindexed-max-mib $g --out ${OUTD:-/tmp/s57}/ab-$r-$g >> $out 2>&1
    rm -rf ${OUTD:-/tmp/s57}/ab-$r-$g/image-* ${OUTD:-/tmp/s57}/ab-$r-$g/run-*
  done
done
echo DONE >> $out
