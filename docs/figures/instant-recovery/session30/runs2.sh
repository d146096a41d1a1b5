#!/bin/bash
# each arg: label|workload|extra instant-bench args ; server = $EXE (default /tmp/s30/laz-new)
exe=${EXE:-/tmp/s30/laz-new}
for spec in "$@"; do
  IFS='|' read label wl extra <<<"$spec"
  ${DRIVER:-/tmp/s30/laz-new} instant-bench --server-exe $exe --keys 5000000 --targets ailir --workloads $wl \
    --clients 200 --duration-s 15 --settle-s 15 $extra --out /tmp/s30/runs > /tmp/s30/runs.txt 2>&1
  line=$(grep 'first reply' /tmp/s30/runs.txt | head -1)
  echo "$label $wl [$extra] $line" | python3 -c "
import sys,re
l=sys.stdin.read().strip(); m=re.search(r'first reply ([\d.]+) ms, recovered ([\d.]+) ms, (\d+)/s during, (\d+)/s after', l)
print(l.split(' instant-bench')[0], '| first %s ms, recovered %.2f s, ratio %.3f (%s / %s)' % (m[1], float(m[2])/1000, int(m[3])/int(m[4]), m[3], m[4]) if m else l)"
  cp /tmp/s30/runs/$wl-ailir.csv /tmp/s30/tl-$label-$wl-$(date +%H%M%S).csv 2>/dev/null
  rm -rf /tmp/s30/runs/image-ailir
done
