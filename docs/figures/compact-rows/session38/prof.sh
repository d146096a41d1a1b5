#!/bin/bash
# usage: prof.sh BIN OUT — unloaded restore of the 5M image under perf
BIN=$1; OUT=$2
rm -rf /tmp/s38/img.copy; cp -r /tmp/s38/ib/image-ailir /tmp/s38/img.copy; sync
perf record -F 1999 -g -o $OUT -- $BIN serve --dir /tmp/s38/img.copy --durability indexed --port 18556 > /tmp/s38/prof-serve.log 2>&1 &
PPID2=$!
sleep 0.3
for i in $(seq 1 400); do
  st=$(redis-cli -p 18556 info recovery 2>/dev/null | grep recovery_state | tr -d '\r')
  [ "$st" = "recovery_state:done" ] && break
  sleep 0.05
done
kill -INT $PPID2; sleep 3; pkill -9 -f "port 18556"; wait
