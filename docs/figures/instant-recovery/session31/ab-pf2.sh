#!/bin/bash
# in-place restarts: configs alternating
exe=/tmp/s31/laz-pf
wl=${WL:-read-only}
for r in $(seq 1 ${ROUNDS:-2}); do
  for cfg in "0 4 1" "2000 4 1" "2000 2 1" "2000 4 0.5"; do
    set -- $cfg
    LAZARUS_EXP_PREFAULT_MIB=$1 $exe instant-bench --keys 5000000 --targets ailir --workloads $wl --clients 200 --duration-s 15 --settle-s 15 \
      --in-place --restore-walkers $2 --restore-cpu-share $3 --out /tmp/s31/abpf > /tmp/s31/abpf.txt 2>&1
    echo "round $r pf $1 walkers $2 share $3 $(grep 'first reply' /tmp/s31/abpf.txt | head -1) $(tail -1 /tmp/s31/pf-times.txt)"
    cp /tmp/s31/abpf/$wl-ailir.csv /tmp/s31/abpf2-tl-$wl-$1-$2-$3-round$r.csv
    rm -rf /tmp/s31/abpf/image-ailir
  done
done
