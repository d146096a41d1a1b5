#!/bin/bash
# gate-fixed build + experimental prefault at serve start; in-place restarts; configs alternating
exe=/tmp/s31/laz-pf3
wl=${WL:-read-only}
for r in $(seq 1 ${ROUNDS:-2}); do
  for cfg in "0 4" "2000 4" "2000 2" "0 2"; do
    set -- $cfg
    LAZARUS_EXP_PREFAULT_MIB=$1 $exe instant-bench --keys 5000000 --targets ailir --workloads $wl --clients 200 --duration-s 15 --settle-s 15 \
      --in-place --restore-walkers $2 --out /tmp/s31/abpf3 > /tmp/s31/abpf3.txt 2>&1
    echo "round $r pf $1 walkers $2 $(grep 'first reply' /tmp/s31/abpf3.txt | head -1) $(tail -1 /tmp/s31/pf-times2.txt 2>/dev/null)"
    rm -rf /tmp/s31/abpf3/image-ailir
  done
done
