#!/bin/bash
# docs/PERFORMANCE.md, "Taurus", "Session 26": recovery of a taurus-data log over a checkpoint,
# binaries alternating, each on a fresh copy, page cache evicted. Prints per run the checkpoint
# load, the replay and the index rebuild, their sum, and the whole command's wall time.
# usage: checkpoint-recovery-ab.sh ROUNDS THREADS LOGDIR BIN...
R=$1; T=$2; L=$3; shift 3
for r in $(seq "$R"); do
  for b in "$@"; do
    rm -rf w && cp -r "$L" w
    out=$(/usr/bin/time -f "TIME wall %e user %U sys %S" "$b" recover --log-dir w/d0 --log-dir w/d1 \
          --threads "$T" --cold 2>&1)
    ck=$(echo "$out" | grep "^checkpoint  " | awk '{print $2}')
    rp=$(echo "$out" | grep "^replay  " | awk '{print $2}')
    rb=$(echo "$out" | grep "^index rebuild" | awk '{print $3}')
    echo "round $r bin $(basename "$b") threads $T checkpoint_ms $ck replay_ms $rp rebuild_ms $rb" \
      "sum_ms $(python3 -c "print(round($ck + $rp + $rb, 1))") $(echo "$out" | grep TIME | cut -d' ' -f2-)"
  done
done
