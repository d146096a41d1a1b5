#!/bin/bash
# ab.sh ROUNDS OUTFILE "name|bin|ENV=V ...|extra args" ...: alternating instant-bench read-only runs (5 M keys)
# SWAP=1: the specs' order reversed every other round (a fixed order lets the machine's drift
# pass for a difference between builds: docs/PERFORMANCE.md, "Taurus", "Session 54").
rounds=$1; outf=$2; shift 2
mkdir -p /tmp/s53
for r in $(seq 1 "$rounds"); do
  specs=("$@")
  if [ "${SWAP:-0}" = 1 ] && [ $((r % 2)) = 0 ]; then
    specs=()
    for ((i = $#; i >= 1; i--)); do specs+=("${!i}"); done
  fi
  for spec in "${specs[@]}"; do
    IFS='|' read -r name bin envs extra <<< "$spec"
    w=/tmp/s53/ab-$name; rm -rf $w
    env $envs $bin instant-bench --keys 5000000 --targets ailir --workloads ${WL:-read-only} --clients 200 --duration-s 15 \
      --settle-s 15 --out $w $extra > $w.log 2>&1
    line=$(tail -1 $w/summary.csv)
    ratio=$(echo "$line" | awk -F, '{printf "%.3f", $7/$8}')
    echo "round $r $name $(date +%H:%M:%S) ratio $ratio $line" | tee -a $outf
  done
done
