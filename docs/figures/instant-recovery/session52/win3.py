import re,csv,sys
from collections import Counter
def load(f,tlf,a,b,comm):
    rows=[]
    for line in open(f):
        m=re.match(r'\s*(\S+)\s+([\d.]+):\s+\S+\s*(.*)',line)
        if m: rows.append((re.sub(r'-\d+$','',m.group(1)),float(m.group(2)),re.sub(r'\+0x[0-9a-f]+$','',m.group(3)) or '?'))
    t0=rows[0][1]
    tl=list(csv.DictReader(open(tlf)))
    n=sum(int(r['committed']) for r in tl if a<float(r['time_s'])<=b)
    return Counter(s for g,t,s in rows if g==comm and a<=t-t0<b),n
comm=sys.argv[1]
c0,n0=load('p3t.txt','pl3/read-only-ailir.csv',1,6,comm)
c1,n1=load('p1t.txt','pl/read-only-ailir.csv',6.7,8,comm)
out=[]
for k in set(c0)|set(c1):
    d=c0[k]/999/n0*1e9; a=c1[k]/999/n1*1e9; out.append((d-a,d,a,k))
out.sort(reverse=True)
print('total',sum(c0.values())/999/n0*1e9,sum(c1.values())/999/n1*1e9)
for x in out[:int(sys.argv[2])]: print(f'{x[1]:8.0f} {x[2]:8.0f} {x[0]:8.0f} {x[3][:110]}')
