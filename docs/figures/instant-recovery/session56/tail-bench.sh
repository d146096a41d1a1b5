#!/bin/bash
# tail-bench.sh ROUNDS OUT "name|server-exe" ...: instant-bench read-only runs with --settle-s 0
# (the largest unindexed tail), the driver of lz-new, order swapped every round.
rounds=$1; outf=$2; shift 2
for r in $(seq 1 "$rounds"); do
  specs=("$@")
  if [ $((r % 2)) = 0 ]; then specs=(); for ((i = $#; i >= 1; i--)); do specs+=("${!i}"); done; fi
  for spec in "${specs[@]}"; do
    IFS='|' read -r name exe <<< "$spec"
    w=/tmp/s56/tb-$name; rm -rf $w
    /tmp/s56/lz-new instant-bench --keys 5000000 --targets ailir --workloads ${WL:-read-only} --clients 200 --duration-s 15 \
      --settle-s 0 --out $w --server-exe $exe > $w.log 2>&1
    line=$(tail -1 $w/summary.csv)
    tail=$(grep -o '[0-9]* bytes of unindexed tail [a-z]* in [0-9.]* ms' $w.log | tail -1)
    echo "round $r $name $(date +%H:%M:%S) $tail | $line" | tee -a $outf
  done
done
