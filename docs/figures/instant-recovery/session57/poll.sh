#!/bin/bash
# poll.sh OUT PORTS...: every 0.5 s, the unindexed bytes and recovery state of each port
out=$1; shift
end=$((SECONDS+200))
while [ $SECONDS -lt $end ]; do
  for p in "$@"; do
    v=$(timeout 0.3 redis-cli -p $p INFO recovery 2>/dev/null | tr -d '\r' | grep -E "unindexed|recovery_state" | tr '\n' ' ')
    [ -n "$v" ] && echo "$(date +%s.%N | cut -c1-14) $p $v" >> $out
  done
  sleep 0.5
done
