#!/bin/bash
# docs/PERFORMANCE.md, "Taurus", "Session 24": taurus-data logging with the stream loggers'
# buffered writes (BASE) and direct writes (NEW), binaries interleaved round by round.
# usage: logging-ab.sh ROUNDS BASE NEW -> rows: round binary workload config txn/s (2 workers, 6 s)
R=$1; shift
for r in $(seq 1 "$R"); do
  for b in "$@"; do
    for w in tpcc ycsb; do
      case $w in
        ycsb) W="--workload ycsb --variant taurus --records 200000"; L="2" ;;
        tpcc) W="--workload tpcc --warehouses 2 --mix new-order,payment"; L="1 2" ;;
      esac
      echo "$r $(basename "$b") $w none $("$b" bench $W --threads 2 --duration-s 6 --durability none 2>&1 | awk '/^throughput/{print $2}')"
      for lg in $L; do
        rm -rf td; dirs=""; for i in $(seq 0 $((lg - 1))); do dirs="$dirs --log-dir td/d$i"; done
        "$b" bench $W --threads 2 --duration-s 0.2 --durability taurus-data $dirs --loggers "$lg" --fresh >/dev/null 2>&1
        echo "$r $(basename "$b") $w td${lg}L $("$b" bench $W --threads 2 --duration-s 6 --durability taurus-data $dirs --loggers "$lg" --resume 2>&1 | awk '/^throughput/{print $2}')"
      done
    done
  done
done
