#!/bin/bash
# prof-indexer.sh OUT: perf profile (10 s) of a restarted 5 M-key AILIR server under the write-only
# load, taken once its restore is done; then the Indexer thread's share and top symbols.
out=$1; mkdir -p $out
/tmp/s57/lz-final instant-bench --keys 5000000 --targets ailir --workloads write-only --duration-s 40 \
  --settle-s 15 --out $out/bench > $out/bench.txt 2>&1 &
bench=$!
for i in $(seq 1 400); do
  s=$(timeout 0.3 redis-cli -p 17002 INFO recovery 2>/dev/null | tr -d '\r' | grep recovery_state)
  [ "$s" = "recovery_state:done" ] && break
  sleep 0.25
done
sleep 3
pid=$(pgrep -f "serve --port 17002" | head -1)
echo "server pid $pid at $(date +%T)" >> $out/bench.txt
perf record -F 999 -g -p $pid -o $out/perf.data -- sleep 10 2> $out/perf-record.txt
for t in /proc/$pid/task/*; do echo "$(cat $t/comm) $(awk '{print $14+$15}' $t/stat)"; done > $out/threads-cpu.txt
wait $bench
rm -rf $out/bench/image-* $out/bench/run-*
perf report -i $out/perf.data --no-children --sort comm -g none --stdio 2>/dev/null | grep -v "^#" | grep -v "^$" | head -20 > $out/by-thread.txt
perf report -i $out/perf.data --no-children --comms lazarus-indexer --sort sym -g none --stdio 2>/dev/null | grep -v "^#" | grep -v "^$" | head -40 > $out/indexer-syms.txt
echo DONE >> $out/bench.txt
