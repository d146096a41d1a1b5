#!/bin/bash
# ab.sh OUT ROUNDS "S1:F1 S2:F2 ...": alternating instant-bench runs (5 M keys, 200 clients, AILIR,
# defaults but --restore-cpu-share S --restore-front-load F; "-" leaves one at the server's
# default), one summary line per run; each run's timeline is kept as OUT.d/<S:F>-<round>.csv and
# its whole output (the server's startup lines too) as OUT.d/<S:F>-<round>.log.
# BIN: the lazarus binary; WL: the workload (default read-only); WORK: scratch directory.
out=$1; rounds=$2; variants=$3
bin=${BIN:-target/release/lazarus}
work=${WORK:-/tmp/s36}
mkdir -p "$out.d"
for r in $(seq 1 "$rounds"); do
  for v in $variants; do
    s=${v%%:*}; f=${v##*:}
    flags=()
    [ "$s" != "-" ] && flags+=(--restore-cpu-share "$s")
    [ "$f" != "-" ] && flags+=(--restore-front-load "$f")
    "$bin" instant-bench --keys 5000000 --targets ailir --workloads "${WL:-read-only}" \
      --clients 200 --duration-s 15 --settle-s 15 "${flags[@]}" ${EXTRA:-} --out "$work/run-ab" >"$out.d/$v-$r.log" 2>&1
    grep "ailir.*first reply" "$out.d/$v-$r.log" | sed "s/^/S=$s F=$f round $r: /"
    cp "$work/run-ab/${WL:-read-only}-ailir.csv" "$out.d/$s:$f-$r.csv"
    rm -rf "$work"/run-ab/image-*
  done
done | tee -a "$out"
