#!/bin/bash
# Instructions the instant restore's walk executes, counted by callgrind inside the walkers
# (`Restorer::walk`): repeatable on a noisy machine where CPU seconds are not
# (docs/PERFORMANCE.md, "Instant recovery", "Session 33").
#
# usage: scripts/restore-callgrind.sh LAZARUS_BIN IMAGE_DIR OUT_FILE [PORT]
#   IMAGE_DIR: a crash image of the `indexed` scheme, e.g. the `image-ailir` an
#   `lazarus instant-bench --keys 300000 --targets ailir ...` run leaves in its --out directory.
# Copies IMAGE_DIR, starts `lazarus serve` on the copy under callgrind with one walker, waits
# until INFO says the restore is done, shuts the server down and prints the instructions counted.
# Divide by the image's key count for instructions per key. Needs valgrind and redis-cli.
set -euo pipefail
bin=$1
image=$2
out=$3
port=${4:-18601}
for tool in valgrind redis-cli callgrind_annotate; do
  command -v "$tool" >/dev/null || { echo "restore-callgrind: $tool is not installed" >&2; exit 2; }
done
copy=$(mktemp -d)
trap 'rm -rf "$copy"' EXIT
cp -r "$image"/. "$copy"
valgrind --tool=callgrind --callgrind-out-file="$out" --collect-atstart=no --toggle-collect='*Restorer::walk*' \
  "$bin" serve --dir "$copy" --durability indexed --port "$port" --restore-walkers 1 >"$out.log" 2>&1 &
server=$!
for _ in $(seq 1 1200); do
  if redis-cli -p "$port" INFO recovery 2>/dev/null | grep -q "recovery_state:done"; then
    break
  fi
  sleep 0.5
done
redis-cli -p "$port" SHUTDOWN NOSAVE >/dev/null 2>&1 || true
wait "$server" || true
callgrind_annotate --auto=no --threshold=100 "$out" | awk '/PROGRAM TOTALS/ {print $1}'
