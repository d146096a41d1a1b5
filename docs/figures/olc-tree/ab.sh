#!/bin/bash
# The OLC tree of session 21 against scc::TreeIndex, side by side: two lazarus binaries (the
# same commit, built with IndexBackend::default() = SccTree and = OlcTree) alternating, the
# order flipping every round, each run on its own.
#   usage: ab.sh SCC_BIN OLC_BIN ROUNDS TAURUS_TPCC_LOGS TAURUS_YCSB_LOGS
# TAURUS_*_LOGS: directories holding d0 and d1 of a 2-logger `taurus-data` run
# (docs/figures/taurus/session18/make-logs.sh). Every recovery runs on a fresh copy.
set -euo pipefail
base=$1; new=$2; rounds=$3; tl=$4; yl=$5
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
  local out; out=$(/usr/bin/time -f 'user %U sys %S rss_kb %M' "$bin" recover $dirs --threads 2 "$@" 2>&1)
  local phases; phases=$(echo "$out" | grep -E '  generation 1 ' | grep -oE '(graph|replay) +[0-9.]+ ms' | tr -s ' ' | tr '\n' ' ')
  echo "$label $phases| $(echo "$out" | grep -E '^total' | awk '{print "total", $2, "ms"}') $(echo "$out" | grep '^user')"
}
for r in $(seq 1 "$rounds"); do
  if [ $((r % 2)) = 1 ]; then order="scc olc"; else order="olc scc"; fi
  for which in $order; do
    bin=$base; [ "$which" = olc ] && bin=$new
    run "$r $which tpcc-1w-1t" "$bin" bench --workload tpcc --warehouses 1 --threads 1 --duration-s 6
    run "$r $which tpcc-2w-2t" "$bin" bench --workload tpcc --warehouses 2 --threads 2 --duration-s 6
    run "$r $which ycsb-silor-2t" "$bin" bench --workload ycsb --variant silor --records 1000000 --threads 2 --duration-s 6
    recover "$r $which recover-taurus-tpcc" "$bin" "$tl" --from-generation 1
    recover "$r $which recover-taurus-ycsb" "$bin" "$yl" --from-generation 1
  done
done
