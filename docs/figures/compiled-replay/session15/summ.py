import sys, statistics as st, collections
rows=[l.rstrip('\n').split('\t') for f in sys.argv[1:] for l in open(f) if l.strip() and l[0].isdigit()]
d=collections.defaultdict(list)
for r in rows:
    rnd,log,b,mode,th,el,read,rep,tps,wr=r
    d[(log,th,b,mode)].append((float(el),float(read),float(rep),float(tps),float(wr)))
logs=sorted({(k[0],k[1]) for k in d})
print("log\tthreads\tbinary\tmode\tn\telapsed_s\tread_ms\treplay_ms\ttxn/s(graph+replay)\ttxn/s(with read)")
for log,th in logs:
    for b in ['base','new']:
        for m in ['direct','compiled']:
            v=d.get((log,th,b,m))
            if not v: continue
            med=[st.median(x[i] for x in v) for i in range(5)]
            print(f"{log}\t{th}\t{b}\t{m}\t{len(v)}\t{med[0]:.2f}\t{med[1]:.0f}\t{med[2]:.0f}\t{med[3]:.0f}\t{med[4]:.0f}")
print()
print("log\tcompiled/direct base (g+r, with read)\tcompiled/direct new (g+r, with read)\tnew/base direct (g+r, with read, elapsed base/new)\tnew/base compiled (g+r, with read)")
for log,th in logs:
    def m(b,mo,i): return st.median(x[i] for x in d[(log,th,b,mo)])
    try:
        print(f"{log} {th}t\t{m('base','compiled',3)/m('base','direct',3):.2f}, {m('base','compiled',4)/m('base','direct',4):.2f}\t{m('new','compiled',3)/m('new','direct',3):.2f}, {m('new','compiled',4)/m('new','direct',4):.2f}\t{m('new','direct',3)/m('base','direct',3):.2f}, {m('new','direct',4)/m('base','direct',4):.2f}, {m('base','direct',0)/m('new','direct',0):.2f}\t{m('new','compiled',3)/m('base','compiled',3):.2f}, {m('new','compiled',4)/m('base','compiled',4):.2f}")
    except Exception as e: print(log, e)
