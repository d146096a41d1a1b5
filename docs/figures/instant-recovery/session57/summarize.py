"""summarize.py FILE...: per-run rows and per-bound medians of gate-ab*.sh outputs."""
import re, statistics as st, sys
rows=[]
for path in sys.argv[1:]:
    cur=None; pre=None; tail=None
    for line in open(path):
        m=re.match(r'### round (\d+) gate (\d+)',line)
        if m: cur=(int(m.group(1)),int(m.group(2))); continue
        m=re.search(r'preloaded in ([\d.]+) s',line)
        if m: pre=float(m.group(1)); continue
        m=re.search(r'instant: opened in [\d.]+ ms, (\d+) bytes of unindexed tail read in ([\d.]+) ms',line)
        if m: tail=(int(m.group(1))/1e6,float(m.group(2))); continue
        m=re.search(r'ailir (\S+): first reply ([\d.]+) ms, recovered ([\d.]+) ms, (\d+)/s during, (\d+)/s after',line)
        if m: rows.append(dict(file=path,r=cur[0],g=cur[1],pre=pre,w=m.group(1),first=float(m.group(2)),rec=float(m.group(3))/1000,dur=int(m.group(4)),aft=int(m.group(5)),tail_mb=tail[0],tail_ms=tail[1]))
print("file round bound_mib preload_s workload tail_MB tail_ms first_ms restore_s during after during/after")
for r in rows:
    print(r['file'],r['r'],r['g'],r['pre'],r['w'],round(r['tail_mb'],1),r['tail_ms'],r['first'],round(r['rec'],2),r['dur'],r['aft'],round(r['dur']/r['aft'],3))
print()
print("bound workload runs first_ms(min-max, median) during/after(median) after(median) restore_s(median) preload_s(median)")
for g in sorted({r['g'] for r in rows},reverse=True):
    for w in ('read-only','read-write','write-only'):
        sel=[r for r in rows if r['g']==g and r['w']==w]
        if not sel: continue
        f=[r['first'] for r in sel]
        print(g,w,len(sel),f"{min(f)}-{max(f)} ({st.median(f)})",round(st.median(r['dur']/r['aft'] for r in sel),3),st.median(r['aft'] for r in sel),round(st.median(r['rec'] for r in sel),2),st.median(r['pre'] for r in sel))
