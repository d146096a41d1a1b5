#!/usr/bin/env python3
"""Summarizes logging-ab.sh rows: per binary, workload and config, the txn/s of each round, the
ratio to the same round's `none` of the same binary, and the medians. usage: summ-logging.py FILE"""
import collections, statistics, sys

runs = collections.defaultdict(dict)
for line in open(sys.argv[1]):
    parts = line.split()
    if len(parts) != 5 or not parts[4].isdigit():
        continue
    rnd, binary, workload, config, txns = parts
    runs[(binary, workload)].setdefault(config, {})[int(rnd)] = int(txns)
for (binary, workload), configs in sorted(runs.items()):
    none = configs.get("none", {})
    for config, by_round in sorted(configs.items()):
        ratios = [by_round[r] / none[r] for r in sorted(by_round) if r in none and config != "none"]
        text = f"{binary:8} {workload:5} {config:5} txn/s " + ", ".join(f"{by_round[r]:,}" for r in sorted(by_round))
        text += f"  median {statistics.median(by_round.values()):,.0f}"
        if ratios:
            text += "  ÷ none " + ", ".join(f"{x:.2f}" for x in ratios) + f"  median {statistics.median(ratios):.2f}"
        print(text)
