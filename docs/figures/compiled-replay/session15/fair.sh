#!/usr/bin/env bash
# Direct replay only, base vs new, with one discarded warm-up run per log, order flipped each round.
# usage: fair.sh ROUNDS THREADS MODE LOG...
rounds=$1; threads=$2; mode=$3; shift 3
for name in "$@"; do
  dirs=""; for d in /tmp/s15/logs/$name/d*; do dirs="$dirs --log-dir $d"; done
  ./lazarus-base recover $dirs --threads $threads --from-generation 1 --replay $mode >/dev/null 2>&1
  for ((r=1;r<=rounds;r++)); do
    if ((r % 2)); then order="new base"; else order="base new"; fi
    for b in $order; do
      s=$(date +%s.%N); line=$(./lazarus-$b recover $dirs --threads $threads --from-generation 1 --replay $mode 2>&1 | grep "  generation 1 "); e=$(date +%s.%N)
      read_ms=$(echo "$line" | sed 's/.*read \([0-9.]*\) ms.*/\1/'); replay_ms=$(echo "$line" | sed 's/.*replay \([0-9.]*\) ms.*/\1/')
      tps=$(echo "$line" | sed 's/.*ms, \([0-9]*\) txn\/s.*/\1/'); wr=$(echo "$line" | sed 's/.*(\([0-9]*\) with reading).*/\1/')
      printf '%s\t%s\t%s\t%s\t%s\t%.2f\t%s\t%s\t%s\t%s\n' $r $name $b $mode $threads $(echo "$e - $s" | bc) "$read_ms" "$replay_ms" "$tps" "$wr"
    done
  done
done
