#!/bin/bash
# usage: walkab.sh ROUNDS IMAGE BIN... : unloaded restores of IMAGE, alternating binaries; prints elapsed and walk CPU
rounds=$1; image=$2; shift 2
for r in $(seq 1 $rounds); do
  for bin in "$@"; do
    copy=/tmp/s48/wcopy; rm -rf $copy; cp -r "$image" $copy; sync
    port=18621
    "$bin" serve --dir $copy --durability indexed --port $port >/dev/null 2>&1 &
    pid=$!
    for _ in $(seq 1 600); do
      if redis-cli -p $port INFO recovery 2>/dev/null | grep -q "recovery_state:done"; then break; fi
      sleep 0.1
    done
    info=$(redis-cli -p $port INFO recovery | tr -d '\r')
    el=$(echo "$info" | awk -F: '/recovery_elapsed_ms/ {print $2}')
    wc=$(echo "$info" | awk -F: '/recovery_walk_cpu_ms/ {print $2}')
    echo "round $r $(basename $bin) elapsed_ms $el walk_cpu_ms $wc"
    kill -9 $pid; wait $pid 2>/dev/null
    rm -rf $copy
  done
done
