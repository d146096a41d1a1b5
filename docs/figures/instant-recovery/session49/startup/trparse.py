import sys,re
for f in sys.argv[1:]:
    rows=[l.split() for l in open(f) if l.startswith('TRACE')]
    t0=None; out=[]
    for r in rows:
        if r[1]=='spawn': t0=int(r[2])
    for r in rows:
        lab=r[1]; us=int(r[2]); kv=dict(x.split('=') for x in r[3:])
        out.append(f"{lab}@{(us-t0)/1000:.1f}(cpu{int(kv['cpu'])/1000:.1f},flt{kv['minflt']})")
    fr=[l for l in open(f) if 'first reply' in l and 'instant-bench' in l]
    print(f, fr[0].split('first reply')[1].split(',')[0] if fr else '', ' '.join(out))
