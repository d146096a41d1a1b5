#!/bin/bash
bin=/work/data/s22/lz-c3f9077
for w in 1 default; do
  dir=/work/data/s22/flag/w$w
  extra=""; [ $w = 1 ] && extra="--restore-walkers 1"
  $bin instant-bench --keys 5000000 --targets ailir --workloads read-write --clients 200 --duration-s 30 --settle-s 15 $extra --out $dir > $dir.log 2>&1
  echo "walkers=$w $(grep 'read-write: first' $dir.log)"
done
