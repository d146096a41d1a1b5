#!/usr/bin/env bash
# CPU an idle `lazarus serve` uses (docs/PERFORMANCE.md, "Instant recovery", "Session 12"):
# starts it on an empty directory, waits 2 s, and prints its CPU time over the next 10 s.
# usage: scripts/idle-cpu.sh LAZARUS_BIN DURABILITY [PORT]
set -eu
bin=$1
scheme=$2
port=${3:-7420}
dir=$(mktemp -d)
"$bin" serve --port "$port" --dir "$dir/db" --durability "$scheme" >/dev/null 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$dir"' EXIT
sleep 2
ticks() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
before=$(ticks)
sleep 10
after=$(ticks)
echo "$scheme: $(((after - before) * 1000 / $(getconf CLK_TCK))) ms of CPU in 10 s idle"
