#!/bin/bash
# usage: firstab.sh ROUNDS WORK BIN... : per round and binary, preload 5 M keys with that binary,
# settle 15 s, SIGKILL, restart on the image under 200 read-only clients for 2 s; prints the first
# reply (the restart right after a preload, where session 50 saw the slow ones). CLIENTS (env,
# default 200) sets the load's connections.
rounds=$1; work=$2; shift 2
for r in $(seq 1 "$rounds"); do
  for bin in "$@"; do
    rm -rf "$work"
    line=$("$bin" instant-bench --keys 5000000 --targets ailir --workloads read-only --clients "${CLIENTS:-200}" \
      --duration-s 2 --settle-s 15 --out "$work" 2>&1 | grep "instant-bench: ailir read-only")
    echo "round $r $(basename "$bin") clients ${CLIENTS:-200}: $(echo "$line" | grep -o 'first reply [0-9.]* ms')"
  done
done
rm -rf "$work"
