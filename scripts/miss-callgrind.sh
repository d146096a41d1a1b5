#!/bin/bash
# Instructions an on-demand restore (a request's miss during an instant restore) costs the
# fetching threads, counted by callgrind inside `RestorePool::serve` (docs/PERFORMANCE.md,
# "Instant recovery", "Session 34"): repeatable on a noisy machine where CPU seconds are not.
#
# usage: scripts/miss-callgrind.sh LAZARUS_BIN IMAGE_DIR OUT_FILE [GETS] [PORT]
#   IMAGE_DIR: a crash image of the `indexed` scheme with keys `key:0` .. `key:<n-1>`, e.g. the
#   `image-ailir` an `lazarus instant-bench --keys 300000 --targets ailir ...` run leaves.
# Copies IMAGE_DIR, starts `lazarus serve` on the copy under callgrind with one walker held to a
# hundredth of the CPU (so that almost every request misses), sends GETS (default 5000) GETs of
# distinct random keys one at a time, reads INFO's count of keys restored on demand, shuts the
# server down, and prints: instructions counted, keys restored on demand, instructions per key.
# Needs valgrind, redis-cli and python3.
set -euo pipefail
bin=$1
image=$2
out=$3
gets=${4:-5000}
port=${5:-18602}
for tool in valgrind redis-cli callgrind_annotate python3; do
  command -v "$tool" >/dev/null || { echo "miss-callgrind: $tool is not installed" >&2; exit 2; }
done
keys=$(python3 -c "import csv,sys; r=list(csv.DictReader(open('$image/../summary.csv'))); print(r[0]['keys'])" 2>/dev/null || echo 300000)
copy=$(mktemp -d)
trap 'rm -rf "$copy"' EXIT
cp -r "$image"/. "$copy"
valgrind --tool=callgrind --callgrind-out-file="$out" --collect-atstart=no --toggle-collect='*RestorePool::serve*' \
  "$bin" serve --dir "$copy" --durability indexed --port "$port" --restore-walkers 1 --restore-cpu-share 0.01 \
  >"$out.log" 2>&1 &
server=$!
for _ in $(seq 1 600); do
  redis-cli -p "$port" PING >/dev/null 2>&1 && break
  sleep 0.2
done
python3 - "$port" "$gets" "$keys" <<'PY'
import random, socket, sys
port, gets, keys = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
rng = random.Random(34)
s = socket.create_connection(("127.0.0.1", port))
f = s.makefile("rb")
for n in rng.sample(range(keys), gets):
    k = f"key:{n}".encode()
    s.sendall(b"*2\r\n$3\r\nGET\r\n$%d\r\n%s\r\n" % (len(k), k))
    line = f.readline()
    if line.startswith(b"$") and line != b"$-1\r\n":
        f.read(int(line[1:]) + 2)
    elif not line.startswith(b"$"):
        sys.exit(f"unexpected reply {line!r}")
PY
ondemand=$(redis-cli -p "$port" INFO recovery | tr -d '\r' | awk -F: '/recovery_keys_restored_on_demand/ {print $2}')
redis-cli -p "$port" SHUTDOWN NOSAVE >/dev/null 2>&1 || true
wait "$server" || true
total=$(callgrind_annotate --auto=no --threshold=100 "$out" | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}')
if [ -z "$ondemand" ] || [ "$ondemand" -eq 0 ]; then
  echo "miss-callgrind: no key was restored on demand (is the restore over already? see $out.log)" >&2
  exit 1
fi
echo "instructions $total on_demand $ondemand per_key $((total / ondemand))"
