#!/usr/bin/env bash
# Runs every fuzz target (fuzz/fuzz_targets/*.rs, cargo-fuzz with libFuzzer) for a bounded time
# and prints executions and crashes per target. Needs a nightly toolchain and cargo-fuzz
# (`cargo install cargo-fuzz`); skips with a message without them.
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]     (default 120 s, every target)
#
# New inputs go to a scratch corpus ($LAZARUS_FUZZ_WORK, default /tmp/lazarus-fuzz/corpus/<target>);
# the repository's corpus (fuzz/corpus/<target>) is read as seeds and never written. A crash is
# saved under fuzz/artifacts/<target>/: fix the decoder, add a regression test named after what
# broke, and copy the input into fuzz/corpus/<target>/ (tests/fuzz_corpus.rs replays it on stable).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-120}"
shift || true
if ! rustup toolchain list 2>/dev/null | grep -q nightly; then
    echo "fuzz.sh: no nightly toolchain (rustup toolchain install nightly); skipping" >&2
    exit 0
fi
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
    echo "fuzz.sh: cargo-fuzz is not installed (cargo install cargo-fuzz); skipping" >&2
    exit 0
fi
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    targets=($(ls fuzz/fuzz_targets | sed 's/\.rs$//'))
fi
work="${LAZARUS_FUZZ_WORK:-/tmp/lazarus-fuzz}"
(cd fuzz && cargo +nightly fuzz build -O --fuzz-dir . >/dev/null)
failed=0
printf '%-22s %12s %10s %8s %s\n' target executions exec/s crashes corpus
for t in "${targets[@]}"; do
    mkdir -p "$work/corpus/$t" "$work/logs"
    log="$work/logs/$t.log"
    status=0
    (cd fuzz && cargo +nightly fuzz run -O --fuzz-dir . "$t" "$work/corpus/$t" "corpus/$t" -- \
        -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1) \
        >"$log" 2>&1 || status=$?
    runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
    rate=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
    crashes=$(ls "fuzz/artifacts/$t" 2>/dev/null | wc -l)
    printf '%-22s %12s %10s %8s %s\n' "$t" "${runs:-?}" "${rate:-?}" "$crashes" "$(ls "$work/corpus/$t" | wc -l)"
    if [ "$status" -ne 0 ] || [ "$crashes" -ne 0 ]; then
        failed=1
        echo "  $t failed (exit $status): see $log and fuzz/artifacts/$t/" >&2
    fi
done
exit $failed
