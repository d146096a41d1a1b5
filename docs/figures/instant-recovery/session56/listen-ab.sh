#!/bin/bash
# listen-ab.sh ROUNDS IMAGE OUT BIN_A BIN_B: restarts of one crash image (copied fresh each run),
# order swapped every round; prints the serve log's tail-read and listening lines.
rounds=$1; image=$2; out=$3; shift 3
for r in $(seq 1 "$rounds"); do
  bins=("$@"); [ $((r % 2)) = 0 ] && bins=("$2" "$1")
  for bin in "${bins[@]}"; do
    rm -rf /tmp/s56/run && cp -r "$image" /tmp/s56/run && sync
    $bin serve --port 17500 --dir /tmp/s56/run --durability indexed > /tmp/s56/serve.log 2>&1 &
    pid=$!
    for i in $(seq 1 200); do grep -q listening /tmp/s56/serve.log && break; sleep 0.05; done
    sleep 1
    kill -9 $pid; wait $pid 2>/dev/null
    echo "round $r $(basename $bin) $(date +%H:%M:%S) $(grep -o 'indexed log.*' /tmp/s56/serve.log | head -1) | $(grep -o 'keys recovered in [0-9.]* ms' /tmp/s56/serve.log)" | tee -a $out
  done
done
