#!/bin/bash
# perf record system-wide during the restore window of one instant-bench run.
# $1 server exe, $2 walkers, $3 out dir
exe=$1; w=$2; out=$3; mkdir -p $out
/tmp/laz-base instant-bench --server-exe $exe --keys 5000000 --targets ailir --workloads ${WL:-read-write} \
  --clients 200 --duration-s 20 --settle-s 15 --restore-walkers $w --out $out > $out/bench.txt 2>&1 &
bench=$!
first=""
while true; do
  p=$(pgrep -f "$exe serve" | head -1)
  if [ -n "$p" ] && [ -z "$first" ]; then first=$p; fi
  if [ -n "$p" ] && [ "$p" != "$first" ]; then break; fi
  sleep 0.05
done
sleep ${DELAY:-0}; perf record -a -g -F 499 -o $out/perf.data -- sleep ${PERF_S:-6} 2> $out/perf.err
wait $bench
rm -rf $out/image-ailir
