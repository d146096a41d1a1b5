import sys, statistics as st, collections
rows=[l.split() for l in open(sys.argv[1]) if len(l.split())==4]
by=collections.defaultdict(list); rat=collections.defaultdict(list)
none={}
for r,b,c,t in rows:
    t=int(t); by[(b,c)].append(t)
    if c=='none': none[(r,b)]=t
for r,b,c,t in rows:
    if c!='none': rat[(b,c)].append(int(t)/none[(r,b)])
for k in sorted(by):
    print(k, 'median', st.median(by[k]), 'ratios', [round(x,2) for x in rat.get(k,[])], 'median ratio', round(st.median(rat[k]),2) if k in rat else '')
