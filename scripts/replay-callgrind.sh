#!/bin/bash
# Instructions per redo record of direct and compiled replay, for every experiment of
# benches/replay.rs, under callgrind (repeatable on a noisy machine). docs/PERFORMANCE.md,
# "Compiled replay".
#
# usage: scripts/replay-callgrind.sh BENCH_BINARY OUT_DIR
#   BENCH_BINARY: target/release/deps/replay-<hash> (printed by `cargo bench --bench replay --no-run`)
# Writes OUT_DIR/<mode>-<experiment>.out (callgrind files) and prints one row per experiment:
#   experiment, direct Ir/record, compiled Ir/record, and both without scc's index code and key
#   comparisons (which vary by ±5-15 % between runs of identical work), and the two ratios.
set -euo pipefail
bin=$1
out=$2
mkdir -p "$out"
records=40000 # 20,000 initial rows + 4,000 transactions of 5 statements
experiments=("100 insert" "90 insert / 10 delete" "75 insert / 25 delete" "50 insert / 50 delete"
  "90 insert / 10 update" "75 insert / 25 update" "50 insert / 50 update"
  "100 insert, 2 indexes" "100 insert, 5 indexes" "100 insert, 10 indexes"
  "100 insert, 10 columns" "100 insert, 10 columns, 10 indexes" "100 insert, 25 columns"
  "100 insert, 25 columns, 10 indexes" "100 insert, 50 columns" "100 insert, 50 columns, 10 indexes")

# Total and non-scc instructions of one callgrind file.
count() {
  callgrind_annotate --auto=no --threshold=100 "$1" | python3 -c '
import sys
total = noisy = 0
for line in sys.stdin:
    line = line.strip()
    if not line or not line[0].isdigit() or "(" not in line:
        continue
    n = line.split()[0].replace(",", "")
    if not n.isdigit() or "PROGRAM TOTALS" in line:
        continue
    name = line.split(")", 1)[1].split(" [")[0].split(":", 1)[-1]
    total += int(n)
    if name.startswith(("scc::", "sdd::")) or "Key as core::cmp" in name:
        noisy += int(n)
print(total, total - noisy)'
}

printf 'experiment\tdirect\tcompiled\tdirect_non_scc\tcompiled_non_scc\tratio\tratio_non_scc\n'
for e in "${experiments[@]}"; do
  slug=$(echo "$e" | tr ' /,' '___')
  for mode in direct compiled; do
    REPLAY_ONLY=$mode REPLAY_RUNS=1 REPLAY_WARMUP=0 REPLAY_INITIAL_ROWS=20000 REPLAY_TXNS=4000 valgrind --tool=callgrind \
      --callgrind-out-file="$out/$mode-$slug.out" --toggle-collect='*value::replay::apply_chunk*' \
      "$bin" "$e" >"$out/$mode-$slug.log" 2>&1 &
  done
  wait
  read -r d dn < <(count "$out/direct-$slug.out")
  read -r c cn < <(count "$out/compiled-$slug.out")
  python3 -c "r=$records; print(f'$e\t{$d/r:.0f}\t{$c/r:.0f}\t{$dn/r:.0f}\t{$cn/r:.0f}\t{$c/$d:.2f}\t{$cn/$dn:.2f}')"
done
