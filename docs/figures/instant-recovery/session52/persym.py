"""CPU per request served, by symbol, of one thread group in two windows of `perf record -a`
profiles (session 52). Usage:
  persym.py COMM TOP PERF_A.txt TIMELINE_A.csv FROM_A TO_A PERF_B.txt TIMELINE_B.csv FROM_B TO_B
PERF_*.txt: `perf script -F comm,time,ip,sym` of a profile whose first sample is the restart
(session48/perfload.sh); TIMELINE_*.csv: the instant-bench timeline of the same run; FROM/TO:
seconds from the restart. Prints ns a request in window A, in window B, and the difference,
for the TOP symbols that differ most."""
import csv
import re
import sys
from collections import Counter


def load(perf, timeline, start, end, comm):
    rows = []
    for line in open(perf):
        m = re.match(r"\s*(\S+)\s+([\d.]+):\s+\S+\s*(.*)", line)
        if m:
            symbol = re.sub(r"\+0x[0-9a-f]+$", "", m.group(3)) or "?"
            rows.append((re.sub(r"-\d+$", "", m.group(1)), float(m.group(2)), symbol))
    t0 = rows[0][1]
    served = sum(int(r["committed"]) for r in csv.DictReader(open(timeline)) if start < float(r["time_s"]) <= end)
    samples = Counter(s for g, t, s in rows if g == comm and start <= t - t0 < end)
    return samples, served


comm, top = sys.argv[1], int(sys.argv[2])
a, na = load(sys.argv[3], sys.argv[4], float(sys.argv[5]), float(sys.argv[6]), comm)
b, nb = load(sys.argv[7], sys.argv[8], float(sys.argv[9]), float(sys.argv[10]), comm)
ns = lambda count, served: count / 999 / served * 1e9  # noqa: E731 (999 Hz sampling)
print(f"total ns a request: A {ns(sum(a.values()), na):.0f}, B {ns(sum(b.values()), nb):.0f}")
diffs = sorted(((ns(a[k], na) - ns(b[k], nb), k) for k in set(a) | set(b)), reverse=True)
for d, k in diffs[:top]:
    print(f"{ns(a[k], na):8.0f} {ns(b[k], nb):8.0f} {d:8.0f}  {k[:110]}")
