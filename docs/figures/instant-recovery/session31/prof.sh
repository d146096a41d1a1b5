#!/bin/bash
# perf record system-wide during the restore of one instant-bench run; $1 out dir, rest: extra args
out=$1; shift; mkdir -p $out
/tmp/s31/laz-base instant-bench --server-exe /tmp/s31/laz-base --keys 5000000 --targets ailir --workloads ${WL:-read-write} \
  --clients 200 --duration-s 15 --settle-s 15 "$@" --out $out > $out/bench.txt 2>&1 &
bench=$!
first=""
while true; do
  p=$(pgrep -f "laz-base serve" | head -1)
  if [ -n "$p" ] && [ -z "$first" ]; then first=$p; fi
  if [ -n "$p" ] && [ "$p" != "$first" ]; then break; fi
  sleep 0.05
done
perf record -a -g -F 499 -o $out/perf.data -- sleep ${PERF_S:-5} 2> $out/perf.err
wait $bench
rm -rf $out/image-ailir
