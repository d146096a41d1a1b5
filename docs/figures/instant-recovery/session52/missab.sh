#!/bin/bash
# missab.sh ROUNDS WORK BIN...: per round and binary, a 5 M-key read-only restart under 200
# clients with the walk held to 0.05 of the machine (most requests miss for the whole run);
# prints the request rate over seconds 1-8 from the restart (timeline CSV) and the fetches' CPU.
rounds=$1; work=$2; shift 2
for r in $(seq 1 "$rounds"); do
  for bin in "$@"; do
    rm -rf "$work"
    line=$("$bin" instant-bench --keys 5000000 --targets ailir --workloads read-only --clients 200 --duration-s 8 \
      --settle-s 15 --restore-cpu-share 0.05 --restore-front-load 0 --out "$work" 2>&1 | grep -E "instant-bench: ailir read-only")
    rate=$(awk -F, 'NR>1 && $1>1 && $1<=8 {s+=$2} END {printf "%.0f", s/7}' "$work/read-only-ailir.csv")
    echo "round $r $(basename "$bin"): $rate req/s over 1-8 s; $line"
  done
done
