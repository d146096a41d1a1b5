#!/bin/bash
# docs/PERFORMANCE.md, "Taurus", "Session 24": binaries alternating, each recovery on a fresh copy
# of the same taurus-data logs (made by ../session18/make-logs.sh), page cache evicted.
# usage: recovery-ab.sh ROUNDS THREADS LOGDIR BIN...   (one row per run)
R=$1; T=$2; L=$3; shift 3
for r in $(seq "$R"); do
  for b in "$@"; do
    rm -rf w && cp -r "$L" w
    out=$(/usr/bin/time -f "TIME user %U sys %S rss_kb %M" "$b" recover --log-dir w/d0 --log-dir w/d1 \
          --threads "$T" --cold --from-generation 1 2>&1)
    g1=$(echo "$out" | grep "  generation 1 " | sed -E 's/.*read ([0-9.]+) ms, graph ([0-9.]+) ms, replay ([0-9.]+) ms, ([0-9]+) txn\/s \(([0-9]+) with reading\).*/read_ms \1 graph_ms \2 replay_ms \3 txn_s \4 with_read \5/')
    echo "round $r bin $(basename "$b") threads $T $g1 $(echo "$out" | grep TIME | cut -d' ' -f2-)"
  done
done
