#!/usr/bin/env bash
# The indexed-log paper's scalability experiments (Figures 7 and 8; issue 7): `lazarus
# instant-bench` at several database sizes, SLR, AILIR and SILIR, one workload; then figure files
# (recovery time, and average throughput over the run, against the number of keys) and the report.
# Usage:
#   scripts/instant-scaling.sh [OUT_DIR]        (default /tmp/lazarus-instant-scaling-<date>)
# Environment: KEYS ("1000000 2000000 4000000"), WORKLOAD (read-write), DURATION_S (30),
# CLIENTS (200), SETTLE_S (10), TARGETS (slr,ailir,silir).
set -u -o pipefail
cd "$(dirname "$0")/.."
out="${1:-/tmp/lazarus-instant-scaling-$(date -u +%Y%m%d-%H%M%S)}"
keys_list="${KEYS:-1000000 2000000 4000000}"
workload="${WORKLOAD:-read-write}"
duration_s="${DURATION_S:-30}"
mkdir -p "$out"
cargo build --release --quiet || exit 1
lazarus=target/release/lazarus
failed=0
for keys in $keys_list; do
  if ! $lazarus instant-bench --keys "$keys" --targets "${TARGETS:-slr,ailir,silir}" --workloads "$workload" \
    --clients "${CLIENTS:-200}" --duration-s "$duration_s" --settle-s "${SETTLE_S:-10}" \
    --out "$out/keys-$keys" >"$out/keys-$keys.log" 2>&1; then
    echo "FAILED at $keys keys: $out/keys-$keys.log" >&2
    failed=1
  fi
  # The crash images are as large as the database; only the summaries and timelines are kept.
  find "$out/keys-$keys" -mindepth 1 -maxdepth 1 -type d -exec rm -rf {} +
done
python3 - "$out" "$workload" "$duration_s" $keys_list <<'EOF'
import csv, json, os, sys
out, workload, duration_s, keys_list = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4:]
rows = {}
for keys in keys_list:
    summary = os.path.join(out, f"keys-{keys}", "summary.csv")
    if not os.path.exists(summary):
        continue
    for r in csv.DictReader(open(summary)):
        timeline = os.path.join(out, f"keys-{keys}", f"{r['workload']}-{r['target']}.csv")
        replies = sum(int(l.split(",")[1]) for l in open(timeline).read().splitlines()[1:] if l.strip())
        rows[(int(keys), r["target"])] = (float(r["recovered_ms"]), replies / duration_s)
targets = sorted({t for _, t in rows}, key=lambda t: ["slr", "ailir", "silir"].index(t) if t in ["slr", "ailir", "silir"] else 9)
sizes = sorted({k for k, _ in rows})
note = f"scripts/instant-scaling.sh: lazarus instant-bench --workloads {workload} --duration-s {duration_s:g} per size"
for fig_id, title, y_label, index in [
    ("instant-fig-7", "Recovery time against database size (indexed-log paper, Figure 7)", "ms to full recovery", 0),
    ("instant-fig-8", "Average throughput over the run against database size (Figure 8)", "replies/s", 1),
]:
    groups = [{"label": f"{k / 1e6:g} M keys", "values": [rows.get((k, t), (0.0, 0.0))[index] for t in targets]} for k in sizes]
    figure = {"figure_format_version": 1, "id": fig_id, "title": title, "x_label": "keys preloaded",
              "y_label": y_label, "series": targets, "groups": groups, "stacked": False, "note": note}
    json.dump(figure, open(os.path.join(out, f"{fig_id}.json"), "w"), indent=1)
    print(fig_id, json.dumps(groups))
EOF
$lazarus report "$out"/instant-fig-*.json --plots figures --png --out "$out/report" || failed=1
echo "instant-scaling: $([ $failed = 0 ] && echo ok || echo FAILED), out $out"
exit $failed
