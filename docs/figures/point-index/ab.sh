#!/bin/bash
# The point index of session 20 against scc::HashIndex, side by side: two lazarus binaries
# alternating (the order flips every round), each run on its own, nothing else running.
#   usage: ab.sh BASE_BIN NEW_BIN ROUNDS VALUE_LOG_DIR TAURUS_TPCC_LOGS TAURUS_YCSB_LOGS
# VALUE_LOG_DIR: a `value` log directory (session 18's YCSB SiloR-variant log, 2.3 M entries);
# TAURUS_*_LOGS: directories holding d0 and d1 of a 2-logger `taurus-data` run (session 18's
# docs/figures/taurus/session18/make-logs.sh). Every recovery runs on a fresh copy.
set -euo pipefail
base=$1; new=$2; rounds=$3; vlog=$4; tl=$5; yl=$6
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
run() { # label binary args...
  local label=$1 bin=$2; shift 2
  echo "$label $("$bin" "$@" 2>&1 | grep -E '^throughput' | awk '{print $2}')"
}
recover() { # label binary src extra-args...
  local label=$1 bin=$2 src=$3; shift 3
  rm -rf "$work/c"; cp -r "$src" "$work/c"; sync
  local dirs; dirs=$(ls -d "$work"/c/d* | sed 's/^/--log-dir /' | tr '\n' ' ')
  local out; out=$(/usr/bin/time -f 'user %U sys %S rss_kb %M' "$bin" recover $dirs --threads 2 --cold "$@" 2>&1)
  # value logs: the log replay phase; taurus logs: generation 1's graph and replay.
  local phases; phases=$(echo "$out" | grep -E '^log replay|  generation 1 ' | grep -oE '(log replay|graph|replay) +[0-9.]+ ms' | tr -s ' ' | tr '\n' ' ')
  echo "$label $phases| $(echo "$out" | grep -E '^total' | awk '{print "total", $2, "ms"}') $(echo "$out" | grep '^user')"
}
for r in $(seq 1 "$rounds"); do
  if [ $((r % 2)) = 1 ]; then order="base new"; else order="new base"; fi
  for which in $order; do
    bin=$base; [ "$which" = new ] && bin=$new
    run "$r $which tpcc-1w-1t" "$bin" bench --workload tpcc --warehouses 1 --threads 1 --duration-s 6
    run "$r $which tpcc-2w-2t" "$bin" bench --workload tpcc --warehouses 2 --threads 2 --duration-s 6
    run "$r $which ycsb-silor-2t" "$bin" bench --workload ycsb --variant silor --records 1000000 --threads 2 --duration-s 6
    recover "$r $which recover-value-ycsb" "$bin" "$vlog"
    recover "$r $which recover-taurus-tpcc" "$bin" "$tl" --from-generation 1
    recover "$r $which recover-taurus-ycsb" "$bin" "$yl" --from-generation 1
  done
done
