#!/bin/bash
# docs/PERFORMANCE.md, "Taurus", "Session 26": binaries alternating, each recovery of ALL
# generations on a fresh copy of the same taurus-data logs (made by ../session18/make-logs.sh),
# page cache evicted. Prints per run: replay of generations 0 and 1, the index rebuild (which
# now builds the ordered primary indexes too), their sum, and the whole command's wall time.
# usage: recovery-ab.sh ROUNDS THREADS LOGDIR BIN...
R=$1; T=$2; L=$3; shift 3
for r in $(seq "$R"); do
  for b in "$@"; do
    rm -rf w && cp -r "$L" w
    out=$(/usr/bin/time -f "TIME wall %e user %U sys %S" "$b" recover --log-dir w/d0 --log-dir w/d1 \
          --threads "$T" --cold 2>&1)
    g0=$(echo "$out" | grep "  generation 0 " | sed -E 's/.*replay ([0-9.]+) ms.*/\1/')
    g1=$(echo "$out" | grep "  generation 1 " | sed -E 's/.*graph ([0-9.]+) ms, replay ([0-9.]+) ms.*/\1 \2/')
    rb=$(echo "$out" | grep "^index rebuild" | awk '{print $3}')
    echo "round $r bin $(basename "$b") threads $T replay0_ms $g0 graph1_ms_replay1_ms $g1 rebuild_ms $rb" \
      "sum_ms $(python3 -c "print(round($g0 + $(echo $g1 | cut -d' ' -f2) + $rb, 1))") $(echo "$out" | grep TIME | cut -d' ' -f2-)"
  done
done
