#!/bin/bash
# perf record system-wide from the restart of one instant-bench run (driver laz-drv, server $SERVER); $1 out dir, rest: extra args
out=$1; shift; mkdir -p $out
SERVER=${SERVER:-/tmp/s32/laz-new}
/tmp/s32/laz-drv instant-bench --server-exe $SERVER --keys 5000000 --targets ailir --workloads ${WL:-read-only} \
  --clients 200 --duration-s 15 --settle-s 15 "$@" --out $out > $out/bench.txt 2>&1 &
bench=$!
first=""
name=$(basename $SERVER)
while true; do
  p=$(pgrep -f "$name serve" | head -1)
  if [ -n "$p" ] && [ -z "$first" ]; then first=$p; fi
  if [ -n "$p" ] && [ "$p" != "$first" ]; then break; fi
  sleep 0.05
done
perf record -a -g -F ${FREQ:-499} -o $out/perf.data -- sleep ${PERF_S:-5} 2> $out/perf.err
wait $bench
rm -rf $out/image-ailir
