#!/usr/bin/env bash
# Column patches against whole after-images (docs/PERFORMANCE.md, "Taurus", "Column patches"),
# side by side in one run: serial-data and taurus-data (2 loggers) on YCSB (Taurus variant) and
# TPC-C (new-order + payment), 2 worker threads, each with and without `--whole-rows`; per run a
# load (generation 0), a measured resumed run of DURATION_S (generation 1), and recovery of
# generation 1 on 1 and 2 threads with the log evicted from the page cache. Rounds alternate the
# two modes; medians go into docs by hand. Usage:
#   scripts/taurus-patches-vs-whole.sh [OUT_DIR]     (default /tmp/lazarus-patches-<date>)
# Environment: ROUNDS (2), DURATION_S (4).
set -u -o pipefail
cd "$(dirname "$0")/.."
out="${1:-/tmp/lazarus-patches-$(date -u +%Y%m%d-%H%M%S)}"
rounds="${ROUNDS:-2}"
duration_s="${DURATION_S:-4}"
mkdir -p "$out"
cargo build --release --quiet || exit 1
lazarus=target/release/lazarus
printf 'round\tworkload\tscheme\tmode\ttxn_per_s\tlog_volume\trecovery_1t_txn_per_s\trecovery_2t_txn_per_s\n' \
  >"$out/runs.tsv"
failed=0
for ((round = 1; round <= rounds; round++)); do
  for w in ycsb tpcc; do
    case $w in
      ycsb) wa="--workload ycsb --variant taurus --records 200000" ;;
      tpcc) wa="--workload tpcc --warehouses 2 --mix new-order,payment" ;;
    esac
    for scheme in serial-data taurus-data; do
      for mode in patches whole; do
        name="$w-$scheme-$mode" flags="" dirs="--log-dir $out/data/$w-$scheme-$mode/d0"
        [ "$mode" = whole ] && flags="--whole-rows"
        [ "$scheme" = taurus-data ] && flags="$flags --loggers 2" && dirs="$dirs --log-dir $out/data/$name/d1"
        rm -rf "${out:?}/data/$name"
        # shellcheck disable=SC2086
        $lazarus bench $wa --threads 2 --duration-s 0.2 --durability $scheme $dirs $flags --fresh \
          >"$out/r$round-$name.load.log" 2>&1 || { echo "FAILED load $name" >&2; failed=1; continue; }
        # shellcheck disable=SC2086
        $lazarus bench $wa --threads 2 --duration-s "$duration_s" --durability $scheme $dirs $flags --resume \
          --result "$out/r$round-$name.json" >"$out/r$round-$name.log" 2>&1 ||
          { echo "FAILED run $name" >&2; failed=1; continue; }
        tps=$(python3 -c "import json,sys; print(round(json.load(open(sys.argv[1]))['throughput_per_s']))" \
          "$out/r$round-$name.json")
        volume=$(grep -h '^log records' "$out/r$round-$name.log" | head -1)
        recovered=()
        for threads in 1 2; do
          # shellcheck disable=SC2086
          recovered+=("$($lazarus recover $dirs --threads $threads --cold --from-generation 1 2>&1 |
            awk '/from generation/ {print $1}')")
        done
        printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$round" "$w" "$scheme" "$mode" "$tps" "$volume" \
          "${recovered[0]}" "${recovered[1]}" >>"$out/runs.tsv"
      done
    done
  done
done
echo "taurus-patches-vs-whole: $([ $failed = 0 ] && echo ok || echo FAILED), out $out"
exit $failed
