import sys,re,glob,statistics as st
rows=[]
for f in sorted(glob.glob(sys.argv[1]+'.*.log'), key=lambda x:(int(x.split('.')[-2]), x.split('.')[-3])):
    v=f.split('.')[-3]; r=f.split('.')[-2]
    lines=open(f).read().splitlines()
    sp=[i for i,l in enumerate(lines) if l.startswith('TRACE spawn')]
    if not sp: continue
    idx=sp[-1]; t0=int(lines[idx].split()[2]); ph={}
    for l in lines[idx:]:
        if l.startswith('TRACE'):
            p=l.split(); ph.setdefault(p[1],(int(p[2])-t0)/1000)
    m=[l for l in lines if 'instant-bench: ailir' in l and 'first reply' in l]
    if not m: continue
    g=re.search(r'first reply ([\d.]+) ms, recovered ([\d.NaN]+) ms, (\d+|NaN)/s during, (\d+|NaN)/s after',m[0])
    fr,rec,du,af=g.groups()
    ratio=float(du)/float(af) if af!='NaN' else float('nan')
    rows.append((v,r,float(fr),float(rec),ratio,ph))
    print(f"{v} r{r} first {float(fr):6.1f} recovered {float(rec):8.1f} during/after {ratio:.3f} | "+' '.join(f"{k}={ph[k]:.1f}" for k in ['main','open-start','opened','bound','loops','handle','probe-reply'] if k in ph))
for v in ['old','new']:
    xs=[x for x in rows if x[0]==v]
    if xs:
        print(v, 'n',len(xs),'first median',st.median(x[2] for x in xs),'max',max(x[2] for x in xs),'>100:',sum(x[2]>100 for x in xs),
              'recovered median',st.median(x[3] for x in xs),'ratio median',round(st.median(x[4] for x in xs),3))
