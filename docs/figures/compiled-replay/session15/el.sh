#!/usr/bin/env bash
# Whole recoveries (page cache warm) of generation 1, alternating binaries and modes.
# Prints: round log binary mode threads elapsed_s gen1_read_ms gen1_replay_ms gen1_txn_per_s(graph+replay) gen1_with_read
# usage: el.sh ROUNDS THREADS LOG...
rounds=$1; threads=$2; shift 2
for ((r=1;r<=rounds;r++)); do for name in "$@"; do
  dirs=""; for d in /tmp/s15/logs/$name/d*; do dirs="$dirs --log-dir $d"; done
  for b in base new; do for mode in direct compiled; do
    s=$(date +%s.%N); line=$(./lazarus-$b recover $dirs --threads $threads --from-generation 1 --replay $mode 2>&1 | grep "  generation 1 "); e=$(date +%s.%N)
    read_ms=$(echo "$line" | sed 's/.*read \([0-9.]*\) ms.*/\1/'); replay_ms=$(echo "$line" | sed 's/.*replay \([0-9.]*\) ms.*/\1/')
    tps=$(echo "$line" | sed 's/.*ms, \([0-9]*\) txn\/s.*/\1/'); wr=$(echo "$line" | sed 's/.*(\([0-9]*\) with reading).*/\1/')
    printf '%s\t%s\t%s\t%s\t%s\t%.2f\t%s\t%s\t%s\t%s\n' $r $name $b $mode $threads $(echo "$e - $s" | bc) "$read_ms" "$replay_ms" "$tps" "$wr"
  done; done; done; done
