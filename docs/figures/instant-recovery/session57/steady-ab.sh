#!/bin/bash
# steady-ab.sh ROUNDS OUT: write-only for 40 s after the restart, the lag bound 16 MiB against none.
rounds=$1; out=$2; : > $out
for r in $(seq 1 $rounds); do
  if [ $((r % 2)) -eq 1 ]; then order="16 0"; else order="0 16"; fi
  for g in $order; do
    echo "### round $r gate $g $(date +%T)" >> $out
    rm -f /tmp/s57/lagw-$r-$g.txt; (/tmp/s57/poll.sh /tmp/s57/lagw-$r-$g.txt 17002 &)
    /tmp/s57/lz-gate instant-bench --keys 5000000 --targets ailir --workloads write-only \
      --clients 200 --duration-s 40 --settle-s 15 --unindexed-max-mib $g --out /tmp/s57/st-$r-$g >> $out 2>&1
    pkill -f poll.sh
  done
done
echo DONE >> $out
