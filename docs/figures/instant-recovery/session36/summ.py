# usage: summ.py AB_OUTPUT ...   (the lines ab.sh writes) -- medians per variant
import re,sys,statistics,collections
d=collections.defaultdict(list)
for f in sys.argv[1:]:
  for line in open(f):
    m=re.match(r'S=(\S+) F=(\S+) round (\d+): .*first reply ([\d.]+) ms, recovered ([\d.]+) ms, (\d+)/s during, (\d+)/s after, (\d+) keys.*walk ([\d.]+) s of the server.s ([\d.]+) s \(fetches ([\d.]+) s\)',line)
    if not m: continue
    k=f"S={m.group(1)} F={m.group(2)}"; r=int(m.group(6))/int(m.group(7)); rec=float(m.group(5))/1000
    d[k].append((r,rec,int(m.group(8)),float(m.group(9)),float(m.group(4))))
for k,v in d.items():
  rs=[x[0] for x in v]; recs=[x[1] for x in v]
  print(f"{k}: n={len(v)} ratio median {statistics.median(rs):.3f} [{min(rs):.3f}-{max(rs):.3f}]  restore median {statistics.median(recs):.2f} s [{min(recs):.2f}-{max(recs):.2f}]  misses {statistics.median([x[2] for x in v]):.0f}  walk cpu {statistics.median([x[3] for x in v]):.2f}  first reply {statistics.median([x[4] for x in v]):.0f} ms [{min(x[4] for x in v):.0f}-{max(x[4] for x in v):.0f}]")
