#!/usr/bin/env bash
# Generates stream logs for the compiled-vs-direct A/B (load 0.2 s, then 4 s measured = generation 1).
set -u
L=${LAZARUS:-/tmp/s15/lazarus-base}
out=${OUT:-/tmp/s17/logs}
for w in ycsb tpcc; do
  case $w in
    ycsb) wa="--workload ycsb --variant taurus --records 200000" ;;
    tpcc) wa="--workload tpcc --warehouses 2 --mix new-order,payment" ;;
  esac
  for scheme in serial-data taurus-data; do
    for mode in patches whole; do
      name="$w-$scheme-$mode" flags="" dirs="--log-dir $out/$name/d0"
      [ "$mode" = whole ] && flags="--whole-rows"
      [ "$scheme" = taurus-data ] && flags="$flags --loggers 2" && dirs="$dirs --log-dir $out/$name/d1"
      rm -rf "$out/$name"
      $L bench $wa --threads 2 --duration-s 0.2 --durability $scheme $dirs $flags --fresh >/dev/null 2>&1 || echo FAIL load $name
      $L bench $wa --threads 2 --duration-s 4 --durability $scheme $dirs $flags --resume >/dev/null 2>&1 || echo FAIL run $name
      echo "$name: $dirs"
    done
  done
done
