#!/bin/bash
# in-place restarts, prefault at serve start (env) vs none, alternating
exe=/tmp/s31/laz-pf
wl=${WL:-read-only}
for r in $(seq 1 ${ROUNDS:-2}); do
  for pf in 0 2000; do
    LAZARUS_EXP_PREFAULT_MIB=$pf $exe instant-bench --keys 5000000 --targets ailir --workloads $wl --clients 200 --duration-s 15 --settle-s 15 \
      --in-place --out /tmp/s31/abpf > /tmp/s31/abpf.txt 2>&1
    echo "round $r pf $pf $(grep 'first reply' /tmp/s31/abpf.txt | head -1) $(grep -h prefaulted /tmp/s31/abpf.txt /tmp/s31/abpf/*.log 2>/dev/null | tail -1)"
    cp /tmp/s31/abpf/$wl-ailir.csv /tmp/s31/abpf-tl-$wl-pf$pf-round$r.csv
    rm -rf /tmp/s31/abpf/image-ailir
  done
done
