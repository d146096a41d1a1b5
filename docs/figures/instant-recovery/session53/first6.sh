#!/bin/bash
# first6.sh ROUNDS OUTFILE "name|bin|ENV=V ..." ...: per variant one preload and six read-only restarts of 3 s; first replies
rounds=$1; outf=$2; shift 2
for r in $(seq 1 "$rounds"); do
  for spec in "$@"; do
    IFS='|' read -r name bin envs <<< "$spec"
    w=/tmp/s53/f6-$name; rm -rf $w
    env $envs $bin instant-bench --keys 5000000 --targets ailir --workloads read-only,read-only,read-only,read-only,read-only,read-only \
      --clients 200 --duration-s 3 --settle-s 15 --out $w > $w.log 2>&1
    fr=$(grep -o "first reply [0-9.]* ms" $w.log | awk '{printf "%s ", $3}')
    ls=$(grep -o "listened [0-9.]* ms" $w.log | awk '{printf "%s ", $2}')
    echo "round $r $name $(date +%H:%M:%S) first: $fr| listened: $ls" | tee -a $outf
  done
done
