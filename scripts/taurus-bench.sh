#!/usr/bin/env bash
# Issue 6's measurements in one run (docs/PERFORMANCE.md, "Taurus"): YCSB (Taurus variant) and
# TPC-C (new-order + payment, 2 warehouses) under none, serial-data, serial-cmd, taurus-data and
# taurus-cmd, on 1, 2 and 4 worker threads (Figures 5 and 6), Taurus with 1, 2 and 4 loggers on
# 2 threads, then recovery of each logged scheme's run on 1 and 2 threads (Figure 8), and the
# report of it all. Every configuration runs once per round, rounds alternate, medians go into
# docs by hand. Usage:
#   scripts/taurus-bench.sh [OUT_DIR]     (default /tmp/lazarus-taurus-<date>)
# Environment: ROUNDS (3), DURATION_S (4), DATA (log directories' parent, default OUT_DIR/data),
# YCSB_RECORDS (200000).
set -u -o pipefail
cd "$(dirname "$0")/.."
out="${1:-/tmp/lazarus-taurus-$(date -u +%Y%m%d-%H%M%S)}"
rounds="${ROUNDS:-3}"
duration_s="${DURATION_S:-4}"
data="${DATA:-$out/data}"
mkdir -p "$out" "$data"
cargo build --release --quiet || exit 1
lazarus=target/release/lazarus
log="$out/runs.tsv"
printf 'round\tworkload\tseries\tthreads\ttxn_per_s\tdurable_p50_us\tdurable_p99_us\tload_avg\n' >"$log"

workload_args() { # name
  case "$1" in
    ycsb) echo "--workload ycsb --variant taurus --records ${YCSB_RECORDS:-200000}" ;;
    tpcc) echo "--workload tpcc --warehouses 2 --mix new-order,payment" ;;
  esac
}

log_dirs() { # name loggers: one directory per logger (this machine has one disk)
  local i dirs=""
  for ((i = 0; i < $2; i++)); do dirs="$dirs --log-dir $data/$1/d$i"; done
  echo "$dirs"
}

# One measured run. Logged schemes load with a short run first (generation 0) and measure a
# resumed run (generation 1), so the run's log and its recovery exclude the load.
run() { # round workload scheme threads loggers
  local round=$1 w=$2 scheme=$3 threads=$4 loggers=$5
  local series=$scheme
  [ "$loggers" -gt 0 ] && case $scheme in taurus-*) series="$scheme-${loggers}L" ;; esac
  # The logger-count runs (1 and 4 loggers, 2 threads only) get a figure of their own, so that
  # the thread-sweep figures (Figures 5 and 6) hold one series per scheme.
  local figure=$w
  case $series in taurus-*-1L | taurus-*-4L) figure="$w-loggers" ;; esac
  local name="$w-$series-${threads}t" label="$figure/$series/${threads}t"
  local result="$out/r$round-$name.json"
  # shellcheck disable=SC2046
  if [ "$scheme" = none ]; then
    $lazarus bench $(workload_args "$w") --threads "$threads" --duration-s "$duration_s" --durability none \
      --result "$result" --label "$label" >"$out/r$round-$name.log" 2>&1 || return 1
  else
    local dirs loggers_arg=""
    dirs=$(log_dirs "$name" "$loggers")
    case $scheme in taurus-*) loggers_arg="--loggers $loggers" ;; esac
    rm -rf "${data:?}/$name"
    $lazarus bench $(workload_args "$w") --threads "$threads" --duration-s 0.2 --durability "$scheme" $dirs \
      $loggers_arg --fresh >"$out/r$round-$name.load.log" 2>&1 || return 1
    $lazarus bench $(workload_args "$w") --threads "$threads" --duration-s "$duration_s" --durability "$scheme" \
      $dirs $loggers_arg --resume --result "$result" --label "$label" >"$out/r$round-$name.log" 2>&1 || return 1
    # Only the 2-thread runs' logs are recovered (below); the others would only fill the disk.
    [ "$threads" = 2 ] || rm -rf "${data:?}/$name"
  fi
  python3 - "$result" "$round" "$w" "$series" "$threads" >>"$log" <<'EOF'
import json, os, sys
r = json.load(open(sys.argv[1]))
d = r["total"]["durable_latency_us"]
print("\t".join(sys.argv[2:6] + [f"{r['throughput_per_s']:.0f}", str(d["p50"]), str(d["p99"]), f"{os.getloadavg()[0]:.2f}"]))
EOF
}

recover() { # workload series threads: the last round's log of the 2-thread run
  local w=$1 series=$2 threads=$3 name="$1-$2-2t" dirs
  local loggers=1
  case $series in *-2L) loggers=2 ;; *-4L) loggers=4 ;; esac
  dirs=$(log_dirs "$name" "$loggers")
  # shellcheck disable=SC2086
  $lazarus recover $dirs --threads "$threads" --cold --from-generation 1 \
    --result-json "$out/recovery-$name-${threads}t.json" --label "$w/$series/${threads}t" \
    >"$out/recovery-$name-${threads}t.log" 2>&1
}

failed=0
for ((round = 1; round <= rounds; round++)); do
  for w in ycsb tpcc; do
    for threads in 1 2 4; do
      for scheme in none serial-data serial-cmd taurus-data taurus-cmd; do
        loggers=1
        case $scheme in none) loggers=0 ;; taurus-*) loggers=2 ;; esac
        run "$round" "$w" "$scheme" "$threads" "$loggers" || { echo "FAILED $w $scheme ${threads}t" >&2; failed=1; }
      done
    done
    for scheme in taurus-data taurus-cmd; do
      for loggers in 1 4; do
        run "$round" "$w" "$scheme" 2 "$loggers" || { echo "FAILED $w $scheme ${loggers}L" >&2; failed=1; }
      done
    done
  done
done
for w in ycsb tpcc; do
  for series in serial-data serial-cmd taurus-data-1L taurus-data-2L taurus-data-4L taurus-cmd-1L taurus-cmd-2L \
    taurus-cmd-4L; do
    for threads in 1 2; do
      recover "$w" "$series" "$threads" || { echo "FAILED recovery $w $series ${threads}t" >&2; failed=1; }
    done
  done
done
# The report: the last round's results (one value per point) and every recovery.
$lazarus report "$out"/r"$rounds"-*.json "$out"/recovery-*.json --out "$out/report" --png >"$out/report.log" 2>&1 ||
  failed=1
python3 - "$log" <<'EOF' | tee "$out/medians.tsv"
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
keys = sorted({(r["workload"], r["series"], int(r["threads"])) for r in rows})
print("workload\tseries\tthreads\tmedian_txn_per_s\tmedian_p50_us\tmedian_p99_us\trounds")
for w, s, t in keys:
    rs = [r for r in rows if (r["workload"], r["series"], int(r["threads"])) == (w, s, t)]
    med = lambda k: statistics.median(float(r[k]) for r in rs)
    runs = "/".join(r["txn_per_s"] for r in rs)
    print(f"{w}\t{s}\t{t}\t{med('txn_per_s'):.0f}\t{med('durable_p50_us'):.0f}\t{med('durable_p99_us'):.0f}\t{runs}")
EOF
for f in "$out"/recovery-*.log; do echo "$(basename "$f" .log): $(grep -h 'txn/s from generation' "$f")"; done \
  >"$out/recovery.txt"
for f in "$out"/r"$rounds"-*.log; do
  case $f in *.load.log) continue ;; esac
  bytes=$(grep -h '^log records' "$f") && echo "$(basename "$f" .log): $bytes"
done >"$out/log-bytes.txt"
echo "taurus-bench: $([ $failed = 0 ] && echo ok || echo FAILED), out $out"
exit $failed
