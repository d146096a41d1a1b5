#!/usr/bin/env bash
# base vs new binary, direct vs compiled replay, on generation 1 of each stream log; one discarded
# warm-up per log, then rounds whose order of the four (binary, mode) runs flips every round.
# usage: modes.sh ROUNDS LOG... ; columns: round log binary mode threads elapsed_s read_ms replay_ms txn/s(graph+replay) txn/s(with reading)
rounds=$1; shift
for name in "$@"; do
  dirs=""; for d in /tmp/s17/logs/$name/d*; do dirs="$dirs --log-dir $d"; done
  threads=1; [[ $name == *taurus* ]] && threads=2
  /tmp/lz-new recover $dirs --threads $threads --from-generation 1 >/dev/null 2>&1
  for ((r=1;r<=rounds;r++)); do
    combos="base:direct base:compiled new:direct new:compiled"
    ((r % 2)) || combos="new:compiled new:direct base:compiled base:direct"
    for c in $combos; do b=${c%%:*}; mode=${c##*:}
      s=$(date +%s.%N); line=$(/tmp/lz-$b recover $dirs --threads $threads --from-generation 1 --replay $mode 2>&1 | grep "  generation 1 "); e=$(date +%s.%N)
      read_ms=$(echo "$line" | sed 's/.*read \([0-9.]*\) ms.*/\1/'); replay_ms=$(echo "$line" | sed 's/.*replay \([0-9.]*\) ms.*/\1/')
      tps=$(echo "$line" | sed 's/.*ms, \([0-9]*\) txn\/s.*/\1/'); wr=$(echo "$line" | sed 's/.*(\([0-9]*\) with reading).*/\1/')
      printf '%s\t%s\t%s\t%s\t%s\t%.2f\t%s\t%s\t%s\t%s\n' $r $name $b $mode $threads $(echo "$e - $s" | bc) "$read_ms" "$replay_ms" "$tps" "$wr"
    done
  done
done
