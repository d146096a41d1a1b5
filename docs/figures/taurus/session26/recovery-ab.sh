#!/bin/bash
# docs/PERFORMANCE.md, "Taurus", "Session 26": binaries alternating, each recovering on a fresh
# copy of the same log directories (d0 and d1 under LOGDIR), page cache evicted. Prints per run
# the phases of recovery, their sum, and the whole command's wall and CPU time.
# usage: recovery-ab.sh [KIND] ROUNDS THREADS LOGDIR BIN...
#   KIND generations (default): a taurus-data log made by ../session18/make-logs.sh; prints the
#     replay of generations 0 and 1, generation 1's graph, and the index rebuild (which now
#     builds the ordered primary indexes too).
#   KIND checkpoint: a taurus-data log over a checkpoint; prints the checkpoint load, the replay
#     and the index rebuild.
#   KIND value: a SiloR value log over a checkpoint; prints the checkpoint load, the log replay
#     and the index rebuild.
kind=generations
case $1 in generations|checkpoint|value) kind=$1; shift ;; esac
R=$1; T=$2; L=$3; shift 3
field() { echo "$out" | grep "$1" | awk "{print \$$2}"; }
for r in $(seq "$R"); do
  for b in "$@"; do
    rm -rf w && cp -r "$L" w
    out=$(/usr/bin/time -f "TIME wall %e user %U sys %S" "$b" recover --log-dir w/d0 --log-dir w/d1 \
          --threads "$T" --cold 2>&1)
    rb=$(field "^index rebuild" 3)
    case $kind in
      generations)
        g0=$(echo "$out" | grep "  generation 0 " | sed -E 's/.*replay ([0-9.]+) ms.*/\1/')
        g1=$(echo "$out" | grep "  generation 1 " | sed -E 's/.*graph ([0-9.]+) ms, replay ([0-9.]+) ms.*/\1 \2/')
        phases="replay0_ms $g0 graph1_ms_replay1_ms $g1 rebuild_ms $rb"
        sum="$g0 + $(echo "$g1" | cut -d' ' -f2) + $rb" ;;
      checkpoint | value)
        ck=$(field "^checkpoint  " 2)
        if [ "$kind" = value ]; then rp=$(field "^log replay" 3); else rp=$(field "^replay  " 2); fi
        phases="checkpoint_ms $ck replay_ms $rp rebuild_ms $rb"
        sum="$ck + $rp + $rb" ;;
    esac
    echo "round $r bin $(basename "$b") threads $T $phases sum_ms $(python3 -c "print(round($sum, 1))")" \
      "$(echo "$out" | grep TIME | cut -d' ' -f2-)"
  done
done
