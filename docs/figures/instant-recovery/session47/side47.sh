#!/bin/bash
# side47.sh ROUNDS: AILIR and Redis (AOF everysec), one instant-bench invocation per round.
for r in $(seq 1 $1); do
  /tmp/s47/final instant-bench --keys 5000000 --targets ailir,redis-everysec --workloads read-only --clients 200 --duration-s 15 --settle-s 15 --out /tmp/s47/side 2>&1 | grep -E "instant-bench: (ailir|redis)" | sed "s/^/round $r: /"
  rm -rf /tmp/s47/side/image-*
done
