#!/bin/bash
# RSS of the restarted server every 0.5 s during one instant-bench run; $1 out dir, rest: extra args
out=$1; shift; mkdir -p $out
/tmp/s32/laz-drv instant-bench --server-exe /tmp/s32/laz-new --keys 5000000 --targets ailir --workloads ${WL:-read-only} \
  --clients ${CLIENTS:-200} --duration-s 12 --settle-s 15 "$@" --out $out > $out/bench.txt 2>&1 &
bench=$!
first=""
while true; do
  p=$(pgrep -f "laz-new serve" | head -1)
  if [ -n "$p" ] && [ -z "$first" ]; then first=$p; fi
  if [ -n "$p" ] && [ "$p" != "$first" ]; then break; fi
  sleep 0.05
done
for i in $(seq 1 22); do echo "$i $(grep VmRSS /proc/$p/status 2>/dev/null | awk '{print $2/1024}') $(awk '{print $10, $14/100, $15/100}' /proc/$p/stat 2>/dev/null)"; sleep 0.5; done > $out/rss.txt
wait $bench
rm -rf $out/image-ailir
