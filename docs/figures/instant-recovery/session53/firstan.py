import re, sys
from collections import Counter, defaultdict
# parse perf script with callchains
samples=[]  # (pid, comm, t, [syms])
cur=None
for line in open(sys.argv[1]):
    if not line.strip():
        if cur: samples.append(cur); cur=None
        continue
    if not line.startswith('\t') and not line.startswith(' '):
        m=re.match(r"(.+?)\s+(\d+)/(\d+)\s+([\d.]+):", line)
        if m: cur=(int(m.group(2)), m.group(1).strip(), float(m.group(4)), [])
        continue
    if cur is not None:
        parts=line.strip().split(None,1)
        cur[3].append(parts[1] if len(parts)>1 else '?')
if cur: samples.append(cur)
# server restarts: processes whose comm starts with 'resp-loop' -> their pid; t0 = first sample of that pid (any comm)
first={}
for pid,comm,t,st in samples:
    first.setdefault(pid,t)
servers=sorted({pid for pid,comm,t,st in samples if comm.startswith('resp-loop')}, key=lambda p: first[p])
win=float(sys.argv[2]) if len(sys.argv)>2 else 0.2
def group(comm):
    c=re.sub(r"-?\d+$","",comm)
    return c
for sp in servers:
    t0=first[sp]
    inwin=[s for s in samples if t0<=s[2]<t0+win]
    print(f"=== server pid {sp} t0 {t0:.3f}: {len(inwin)} samples in {win*1000:.0f} ms (2999 Hz x 2 cpus = {int(2999*2*win)})")
    byg=Counter(); clr=Counter(); clrby=Counter(); kern=Counter()
    for pid,comm,t,st in inwin:
        g=('SRV:' if pid==sp else '')+group(comm)
        byg[g]+=1
        leaf=st[0] if st else '?'
        leaf=re.sub(r"\+0x.*","",leaf)
        if 'clear_page' in leaf:
            clr[g]+=1
            user=[f for f in st if not f.startswith('ffffffff') and '[unknown]' not in f]
            # first frame that looks like a rust symbol
            u=next((re.sub(r"\+0x.*","",x) for x in st[1:] if ('lazarus' in x or 'redb' in x or 'mi_' in x or 'alloc' in x) and 'clear_page' not in x), '?')
            clrby[(g,u[:110])]+=1
    print('  by group:', ', '.join(f"{g} {n}" for g,n in byg.most_common(10)))
    print('  clear_page by group:', ', '.join(f"{g} {n}" for g,n in clr.most_common(8)))
    for (g,u),n in clrby.most_common(8): print(f"    {n:4d} {g} <- {u}")
