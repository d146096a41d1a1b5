import csv,sys,glob,statistics,collections
# usage: thirds.py TIMELINE.csv ...   (instant-bench timelines, named [abN-]<variant>-<round>.csv)
# Prints, per variant, the medians over its runs of the mean rate (÷ the run's after-rate) in each
# third of the restore, and of the slowest 0.5 s window (the restart's own window left out).
import re
res=collections.defaultdict(list)
for f in sys.argv[1:]:
    v=re.sub(r'^ab\d+-','',f.split('/')[-1]).rsplit('-',1)[0]
    rows=list(csv.DictReader(open(f)))
    w=[(int(r['committed']),r['checkpoint']=='1') for r in rows]
    dur=[c for c,k in w if k][1:]   # the first window holds the restart itself
    a=statistics.mean([c for c,k in w if not k][1:-1])
    n=len(dur); t=[dur[:n//3],dur[n//3:2*n//3],dur[2*n//3:]]
    res[v].append([statistics.mean(x)/a for x in t]+[min(dur)/a])
for v,l in sorted(res.items()):
    cols=list(zip(*l))
    print(f"{v:10s} n={len(l)}  thirds (median over runs): " + "  ".join(f"{statistics.median(c):.2f}" for c in cols[:3]) + f"   min window {statistics.median(cols[3]):.2f} [{min(cols[3]):.2f}-{max(cols[3]):.2f}]")
