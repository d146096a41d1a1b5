#!/bin/bash
# side.sh ROUNDS: AILIR at share 0.28 beside Redis's AOF (everysec, always), then AILIR at 0.35; read-only, default settle
for r in $(seq 1 $1); do
  for spec in "s28|ailir,redis-everysec,redis-always|0.28" "s35|ailir|0.35"; do
    IFS='|' read -r name targets share <<< "$spec"
    w=/tmp/s59side/$name-$r; rm -rf $w; mkdir -p /tmp/s59side
    /tmp/lz-base instant-bench --keys 5000000 --targets $targets --workloads read-only --clients 200 --duration-s 15 \
      --restore-cpu-share $share --out $w > $w.log 2>&1
    tail -n +2 $w/summary.csv | while read line; do echo "round $r $name $(date +%H:%M:%S) $line" | tee -a /tmp/side59.txt; done
    rm -rf $w/image-* $w/run-*
  done
done
