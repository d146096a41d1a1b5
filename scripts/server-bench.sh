#!/usr/bin/env bash
# `lazarus serve` under each durability scheme beside `redis-server` with and without its AOF,
# driven by redis-benchmark (docs/PERFORMANCE.md, "Server"). Each configuration is started fresh,
# benchmarked (SET and GET, unpipelined and with 16 requests per pipeline), and shut down; the
# configurations run one after another and the whole round repeats ROUNDS times, so that every
# configuration sees the machine's noise alike. Prints one TSV line per measurement and writes
# them to OUT_DIR/runs.tsv; medians go into docs by hand. Usage:
#   scripts/server-bench.sh [OUT_DIR]     (default /tmp/lazarus-server-<date>)
# Environment: ROUNDS (3), PORT (7100), REQUESTS (40000; 10× with -P 16), KEYS (100000),
# CLIENTS (50), SCHEMES (none value indexed indexed-sync), REDIS (1; 0 skips Redis), and
# BINS ("lazarus=target/release/lazarus"): space-separated NAME=PATH of lazarus binaries to
# compare side by side (names without '-'; configurations are then NAME-<scheme>).
# Needs redis-benchmark and redis-server (Debian: apt-get install redis-tools redis-server); the
# Redis configurations are skipped with a message when redis-server is missing.
set -u -o pipefail
cd "$(dirname "$0")/.."
out="${1:-/tmp/lazarus-server-$(date -u +%Y%m%d-%H%M%S)}"
rounds="${ROUNDS:-3}"
port="${PORT:-7100}"
requests="${REQUESTS:-40000}"
keys="${KEYS:-100000}"
clients="${CLIENTS:-50}"
schemes="${SCHEMES:-none value indexed indexed-sync}"
bins="${BINS:-lazarus=target/release/lazarus}"
command -v redis-benchmark >/dev/null || { echo "server-bench: redis-benchmark is missing (apt-get install redis-tools)" >&2; exit 1; }
mkdir -p "$out"
cargo build --release --quiet || exit 1
declare -A binary
configs=""
for entry in $bins; do
  binary[${entry%%=*}]=${entry#*=}
  for scheme in $schemes; do configs="$configs ${entry%%=*}-$scheme"; done
done
printf 'round\tconfig\ttest\tpipeline\trequests_per_s\tp50_ms\n' >"$out/runs.tsv"

wait_port() { # up to 60 s for the server to answer PING
  local i
  for ((i = 0; i < 600; i++)); do
    redis-cli -p "$port" ping >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  return 1
}

start() { # config data_dir
  case $1 in
    redis-none) redis-server --port "$port" --save '' --appendonly no --dir "$2" >"$out/server.log" 2>&1 & ;;
    redis-always | redis-everysec)
      redis-server --port "$port" --save '' --appendonly yes --appendfsync "${1#redis-}" --dir "$2" \
        >"$out/server.log" 2>&1 &
      ;;
    *-none) ${binary[${1%%-*}]} serve --port "$port" --durability none >"$out/server.log" 2>&1 & ;;
    *) ${binary[${1%%-*}]} serve --port "$port" --dir "$2" --durability "${1#*-}" >"$out/server.log" 2>&1 & ;;
  esac
  server=$!
  wait_port
}

stop() {
  redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
  wait "$server" 2>/dev/null || true
}

if [ "${REDIS:-1}" = 0 ]; then
  :
elif command -v redis-server >/dev/null; then
  configs="$configs redis-none redis-always redis-everysec"
else
  echo "server-bench: redis-server is missing: Redis configurations skipped" >&2
fi
failed=0
for ((round = 1; round <= rounds; round++)); do
  for config in $configs; do
    dir="$out/data/$config"
    rm -rf "$dir" && mkdir -p "$dir"
    start "$config" "$dir" || { echo "FAILED to start $config" >&2; failed=1; stop; continue; }
    for pipeline in 1 16; do
      n=$requests
      [ "$pipeline" -gt 1 ] && n=$((requests * 10))
      # --csv: "test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms",...
      redis-benchmark -p "$port" -t set,get -n "$n" -r "$keys" -c "$clients" -P "$pipeline" -d 32 --csv 2>/dev/null |
        tr -d '"' | awk -F, -v r="$round" -v c="$config" -v p="$pipeline" \
          'NR > 1 { printf "%s\t%s\t%s\t%s\t%.0f\t%s\n", r, c, $1, p, $2, $5 }' | tee -a "$out/runs.tsv"
    done
    stop
  done
done
python3 - "$out/runs.tsv" <<'EOF' | tee "$out/medians.tsv"
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
keys = sorted({(r["config"], r["test"], int(r["pipeline"])) for r in rows}, key=lambda k: (k[0], k[2], k[1]))
print("config\ttest\tpipeline\tmedian_requests_per_s\tmedian_p50_ms\trounds")
for c, t, p in keys:
    rs = [r for r in rows if (r["config"], r["test"], int(r["pipeline"])) == (c, t, p)]
    med = lambda k: statistics.median(float(r[k]) for r in rs)
    print(f"{c}\t{t}\t{p}\t{med('requests_per_s'):.0f}\t{med('p50_ms'):.3f}\t{'/'.join(r['requests_per_s'] for r in rs)}")
EOF
echo "server-bench: $([ $failed = 0 ] && echo ok || echo FAILED), out $out"
exit $failed
