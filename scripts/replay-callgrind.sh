#!/bin/bash
# Instructions per redo record of direct and compiled replay, for every experiment of
# benches/replay.rs, under callgrind (repeatable on a noisy machine). docs/PERFORMANCE.md,
# "Compiled replay".
#
# usage: scripts/replay-callgrind.sh BENCH_BINARY OUT_DIR
#   BENCH_BINARY: target/release/deps/replay-<hash> (printed by `cargo bench --bench replay --no-run`)
# Writes OUT_DIR/<mode>-<experiment>-<run>.out (callgrind files) and prints one row per
# experiment: experiment, direct and compiled instructions per record (the median of RUNS runs
# each, default 3: the point index's hash seed decides probe sequences, and with them the counts
# vary by up to a few percent between runs of identical work; run r of both modes hashes with
# seed r, `REPLAY_HASH_SEED`, so each pair of runs probes alike), and the ratio compiled / direct.
# Every run of an experiment replays the same log, written once into OUT_DIR/logs
# (`REPLAY_LOG_DIR`): two logs of the same history differ in how timing split them into blocks
# and epochs, which moved the counts by up to 3 %. LOGS=DIR puts them elsewhere (two binaries
# compared on one set of logs); EXPERIMENTS (one name per line) picks some experiments.
set -euo pipefail
bin=$1
out=$2
runs=${RUNS:-3}
logs=${LOGS:-$out/logs}
mkdir -p "$out" "$logs"
records=40000 # 20,000 initial rows + 4,000 transactions of 5 statements
experiments=("100 insert" "90 insert / 10 delete" "75 insert / 25 delete" "50 insert / 50 delete"
  "90 insert / 10 update" "75 insert / 25 update" "50 insert / 50 update"
  "100 insert, 2 indexes" "100 insert, 5 indexes" "100 insert, 10 indexes"
  "100 insert, 10 columns" "100 insert, 10 columns, 10 indexes" "100 insert, 25 columns"
  "100 insert, 25 columns, 10 indexes" "100 insert, 50 columns" "100 insert, 50 columns, 10 indexes")

# Total instructions of one callgrind file.
count() {
  callgrind_annotate --auto=no --threshold=100 "$1" | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}'
}

if [ -n "${EXPERIMENTS:-}" ]; then
  mapfile -t experiments <<<"$EXPERIMENTS"
fi
sizes=(REPLAY_INITIAL_ROWS=20000 REPLAY_TXNS=4000)

printf 'experiment\tdirect\tcompiled\tratio\n'
for e in "${experiments[@]}"; do
  slug=$(echo "$e" | tr ' /,' '___')
  env "${sizes[@]}" REPLAY_LOG_DIR="$logs" REPLAY_ONLY=write "$bin" "$e" >"$out/write-$slug.log" 2>&1
  for r in $(seq 1 "$runs"); do
    for mode in direct compiled; do
      env "${sizes[@]}" REPLAY_LOG_DIR="$logs" REPLAY_HASH_SEED=$r REPLAY_ONLY=$mode REPLAY_RUNS=1 REPLAY_WARMUP=0 valgrind --tool=callgrind \
        --callgrind-out-file="$out/$mode-$slug-$r.out" --toggle-collect='*value::replay::apply_chunk*' \
        "$bin" "$e" >"$out/$mode-$slug-$r.log" 2>&1 &
    done
    wait
  done
  d=$(for r in $(seq 1 "$runs"); do count "$out/direct-$slug-$r.out"; done | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
  c=$(for r in $(seq 1 "$runs"); do count "$out/compiled-$slug-$r.out"; done | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
  python3 -c "r=$records; print(f'$e\t{$d/r:.0f}\t{$c/r:.0f}\t{$c/$d:.3f}')"
done
