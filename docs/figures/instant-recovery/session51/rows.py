import re,sys,statistics as st
rows={}
for f in sys.argv[1:]:
    for l in open(f):
        m=re.match(r'round (\d+) (\S+): instant-bench: ailir read-only: first reply ([\d.]+) ms, recovered ([\d.]+) ms, (\d+)/s during, (\d+)/s after, (\d+) keys.*walk ([\d.]+) s of the server\'s ([\d.]+) s \(fetches ([\d.]+) s\)',l)
        if not m: continue
        r,b,first,rec,dur,aft,keys,walk,srv,fetch=m.groups()
        rows.setdefault(b,[]).append((float(first),float(rec)/1e3,int(dur)/int(aft),float(fetch)*1e6/int(keys),int(keys),float(walk)))
for b,v in rows.items():
    print(b, "runs",len(v))
    for x in v: print("   first %.1f ms restore %.2f s ratio %.3f fetch %.1f us keys %d walk %.2f"%x)
    print("   median: first %.1f restore %.2f ratio %.3f fetch %.1f us"%(st.median(x[0] for x in v),st.median(x[1] for x in v),st.median(x[2] for x in v),st.median(x[3] for x in v)))
