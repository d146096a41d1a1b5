#!/bin/bash
# monitor the restarted server of one instant-bench run: t, utime, stime, minflt, majflt, rss
# $1 exe pattern, $2 out file
exe=$1; out=$2
first=""
while true; do
  p=$(pgrep -f "$exe serve" | head -1)
  if [ -n "$p" ] && [ -z "$first" ]; then first=$p; fi
  if [ -n "$p" ] && [ "$p" != "$first" ]; then break; fi
  sleep 0.02
done
t0=$(date +%s.%N)
while [ -e /proc/$p/stat ]; do
  s=$(cat /proc/$p/stat 2>/dev/null) || break
  rss=$(awk '/VmRSS/{print $2}' /proc/$p/status 2>/dev/null)
  t=$(date +%s.%N)
  echo "$s" | awk -v t=$t -v t0=$t0 -v rss=$rss '{ # after comm field; assume no spaces in comm
    printf "%.2f utime=%.2f stime=%.2f minflt=%d majflt=%d rss_mb=%d\n", t-t0, $14/100, $15/100, $10, $12, rss/1024 }' 
  sleep 0.5
done > $out
