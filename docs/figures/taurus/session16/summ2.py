import sys, statistics as st, collections
rows=[l.split() for l in open(sys.argv[1]) if len(l.split())==4]
none={(r,w):int(t) for r,w,c,t in rows if c=='none'}
rat=collections.defaultdict(list); tp=collections.defaultdict(list)
for r,w,c,t in rows:
    tp[(w,c)].append(int(t))
    if c!='none': rat[(w,c)].append(int(t)/none[(r,w)])
for k in sorted(tp):
    line=f"{k[0]} {k[1]} median {st.median(tp[k]):.0f}"
    if k in rat: line+=f" ratios {[round(x,2) for x in rat[k]]} median {st.median(rat[k]):.2f}"
    print(line)
