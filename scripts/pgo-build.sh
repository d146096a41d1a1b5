#!/bin/bash
# A profile-guided release build of `lazarus` (docs/PERFORMANCE.md, "TPC-C", "Session 65"):
# builds an instrumented binary, trains it on short runs of the bench's workloads, merges the
# profile and builds again with it. The result is target/pgo/release/lazarus; the ordinary
# `cargo build --release` is untouched.
#
# Needs `llvm-profdata` of the LLVM major version rustc was built with (`rustc -vV`); on Debian it
# is installed from apt as llvm-N when missing. Takes two release builds (~5-6 min each on 2 cores).
#
# usage: scripts/pgo-build.sh [TRAIN_SECONDS]   (default 4 s per training run)
set -euo pipefail
cd "$(dirname "$0")/.."
train_s=${1:-4}
llvm_major=$(rustc -vV | awk '/^LLVM version/ { split($3, v, "."); print v[1] }')
profdata=/usr/lib/llvm-$llvm_major/bin/llvm-profdata
if [ ! -x "$profdata" ]; then
  echo "pgo-build: installing llvm-$llvm_major for llvm-profdata" >&2
  apt-get update -qq && apt-get install -y -qq "llvm-$llvm_major" >/dev/null
fi
[ -x "$profdata" ] || { echo "pgo-build: no $profdata (rustc uses LLVM $llvm_major)" >&2; exit 1; }

work=target/pgo-work
rm -rf "$work/profiles"
mkdir -p "$work/profiles"
CARGO_TARGET_DIR="$work/gen" RUSTFLAGS="-Cprofile-generate=$PWD/$work/profiles" cargo build --release
gen="$work/gen/release/lazarus"
# The training mix: every workload the bench drives, at 1 and 2 threads, no durability and one
# logging scheme, so that no path the benchmarks take is laid out as cold.
"$gen" bench --workload tpcc --warehouses 1 --threads 1 --duration-s "$train_s" >/dev/null
"$gen" bench --workload tpcc --warehouses 2 --threads 2 --duration-s "$train_s" >/dev/null
"$gen" bench --workload ycsb --threads 2 --duration-s "$train_s" >/dev/null
"$gen" bench --workload smallbank --threads 2 --duration-s "$train_s" >/dev/null
"$gen" bench --workload tpcc --warehouses 2 --mix new-order,payment --threads 2 --durability taurus-data \
  --log-dir "$work/log0" --log-dir "$work/log1" --loggers 2 --duration-s "$train_s" --fresh >/dev/null
"$gen" recover --log-dir "$work/log0" --log-dir "$work/log1" --threads 2 >/dev/null
rm -rf "$work/log0" "$work/log1"
"$profdata" merge -o "$work/lazarus.profdata" "$work/profiles"
CARGO_TARGET_DIR=target/pgo RUSTFLAGS="-Cprofile-use=$PWD/$work/lazarus.profdata" cargo build --release
echo "pgo-build: target/pgo/release/lazarus"
