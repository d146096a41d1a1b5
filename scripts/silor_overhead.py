#!/usr/bin/env python3
"""SiloR's logging overhead, side by side: `none` and `value` (with checkpoints) runs of the same
workload, alternated (none, value, none, value, ...) so that a noisy neighbour hits both alike.
Prints per-run numbers, the medians and the ratio value/none, and the latency to durability.

    scripts/silor_overhead.py --workload ycsb --rounds 3 --duration-s 10 -- --records 1000000
    scripts/silor_overhead.py --workload tpcc --rounds 3 --duration-s 10 -- --warehouses 2

Arguments after `--` go to `lazarus bench` unchanged. Results (JSON and timeline CSV of each
run) are kept in --out.
"""
import argparse
import csv
import json
import os
import shutil
import statistics
import subprocess
import sys


def run(binary, workload, scheme, duration_s, threads, ckpt_s, out, index, extra, log_root):
    name = f"{workload}-{scheme}-{index}"
    result = os.path.join(out, name + ".json")
    timeline = os.path.join(out, name + ".csv")
    cmd = [binary, "bench", "--workload", workload, "--threads", str(threads), "--duration-s", str(duration_s),
           "--durability", scheme, "--result", result, "--timeline", timeline, "--label", f"{workload} {scheme}"]
    if scheme == "value":
        log_dir = os.path.join(log_root, name)
        cmd += ["--log-dir", log_dir, "--fresh", "--checkpoint-interval-s", str(ckpt_s)]
    cmd += extra
    print("$", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    if scheme == "value":
        shutil.rmtree(os.path.join(log_root, name), ignore_errors=True)
    with open(result) as f:
        summary = json.load(f)
    with open(timeline) as f:
        windows = list(csv.DictReader(f))
    summary["checkpoint_windows"] = sum(1 for w in windows if w["checkpoint"] == "1")
    summary["windows"] = len(windows)
    return summary


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--binary", default="target/release/lazarus")
    p.add_argument("--workload", required=True)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--duration-s", type=float, default=10.0)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--checkpoint-interval-s", type=float, default=2.0)
    p.add_argument("--out", default="target/silor-overhead")
    p.add_argument("--log-root", default="target/silor-overhead-logs")
    p.add_argument("--latency-kinds", default="",
                   help="comma-separated transaction kinds whose latency to durability to report (e.g. put: "
                        "a read of durable data is acknowledged at once, so the total mixes in zeros)")
    p.add_argument("extra", nargs="*")
    args = p.parse_args()
    if not os.path.exists(args.binary):
        sys.exit(f"{args.binary} not found: run `cargo build --release` first")
    os.makedirs(args.out, exist_ok=True)
    runs = {"none": [], "value": []}
    for i in range(args.rounds):
        for scheme in ("none", "value"):
            s = run(args.binary, args.workload, scheme, args.duration_s, args.threads, args.checkpoint_interval_s,
                    args.out, i, args.extra, args.log_root)
            runs[scheme].append(s)
            t = s["total"]
            print(f"  {scheme:5} round {i}: {s['throughput_per_s']:>10.0f} txn/s  durable p50 "
                  f"{t['durable_latency_us']['p50'] / 1e3:.1f} ms  p99 {t['durable_latency_us']['p99'] / 1e3:.1f} ms"
                  f"  checkpoint windows {s['checkpoint_windows']}/{s['windows']}", flush=True)
    med = {k: statistics.median(r["throughput_per_s"] for r in v) for k, v in runs.items()}
    p50 = statistics.median(r["total"]["durable_latency_us"]["p50"] for r in runs["value"]) / 1e3
    p99 = statistics.median(r["total"]["durable_latency_us"]["p99"] for r in runs["value"]) / 1e3
    ckpt = statistics.median(r["checkpoint_windows"] / max(r["windows"], 1) for r in runs["value"])
    print(f"\n| workload | none txn/s (median) | value+checkpoints txn/s (median) | ratio | durable p50 | durable p99 "
          f"| time in checkpoints |")
    print(f"|---|---|---|---|---|---|---|")
    print(f"| {args.workload} {' '.join(args.extra)} | {med['none']:.0f} | {med['value']:.0f} | "
          f"{med['value'] / med['none']:.3f} | {p50:.1f} ms | {p99:.1f} ms | {ckpt * 100:.0f}% |")
    for kind in [k for k in args.latency_kinds.split(",") if k]:
        def pct(run, q):
            for name, counts in run["per_kind"]:
                if name == kind:
                    return counts["durable_latency_us"][q] / 1e3
            sys.exit(f"no transaction kind {kind!r} in the results")
        kp50 = statistics.median(pct(r, "p50") for r in runs["value"])
        kp99 = statistics.median(pct(r, "p99") for r in runs["value"])
        print(f"latency to durability of {kind} (value, median of runs): p50 {kp50:.1f} ms, p99 {kp99:.1f} ms")


if __name__ == "__main__":
    main()
