#!/bin/bash
# usage: walkrss.sh ROUNDS IMAGE BIN... : unloaded restores of IMAGE, alternating binaries; prints
# the restore's elapsed time and walk CPU (INFO recovery), and the server's resident memory and
# its user and system CPU once the restore is done. Session 54: SWAP=1 reverses the binaries'
# order every other round (a fixed order lets the machine's drift pass for a difference).
rounds=$1; image=$2; shift 2
copy=/tmp/walkrss-copy; port=18621
for r in $(seq 1 "$rounds"); do
  bins=("$@"); if [ "${SWAP:-0}" = 1 ] && [ $((r % 2)) = 0 ]; then bins=(); for b in "$@"; do bins=("$b" "${bins[@]}"); done; fi
  for bin in "${bins[@]}"; do
    rm -rf $copy; cp -r "$image" $copy; sync
    "$bin" serve --dir $copy --durability indexed --port $port >/dev/null 2>&1 &
    pid=$!
    for _ in $(seq 1 600); do
      if redis-cli -p $port INFO recovery 2>/dev/null | grep -q "recovery_state:done"; then break; fi
      sleep 0.1
    done
    info=$(redis-cli -p $port INFO recovery | tr -d '\r')
    el=$(echo "$info" | awk -F: '/recovery_elapsed_ms/ {print $2}')
    wc=$(echo "$info" | awk -F: '/recovery_walk_cpu_ms/ {print $2}')
    rss=$(awk '/VmRSS/ {print $2}' /proc/$pid/status)
    read -r ut st < <(awk '{print $14, $15}' /proc/$pid/stat)
    tck=$(getconf CLK_TCK)
    echo "round $r $(basename "$bin") elapsed_ms $el walk_cpu_ms $wc rss_kib $rss user_ms $((ut * 1000 / tck)) sys_ms $((st * 1000 / tck))"
    kill -9 $pid; wait $pid 2>/dev/null
    rm -rf $copy
  done
done
