import re,csv,sys
from collections import Counter
rows=[]
for line in open('p1t.txt'):
    m=re.match(r'\s*(\S+)\s+([\d.]+):\s+\S+\s*(.*)',line)
    if m: rows.append((re.sub(r'-\d+$','',m.group(1)),float(m.group(2)),re.sub(r'\+0x[0-9a-f]+$','',m.group(3)) or '?'))
t0=rows[0][1]
tl=list(csv.DictReader(open('pl/read-only-ailir.csv')))
def req(a,b): return sum(int(r['committed']) for r in tl if a<float(r['time_s'])<=b)
comm=sys.argv[1]
W=[(1,6),(6.7,8)]
cs=[Counter(s for g,t,s in rows if g==comm and a<=t-t0<b) for a,b in W]
ns=[req(a,b) for a,b in W]
keys=set(k for k,_ in cs[0].most_common(40))|set(k for k,_ in cs[1].most_common(40))
out=[]
for k in keys:
    d=cs[0][k]/999/ns[0]*1e9; a=cs[1][k]/999/ns[1]*1e9
    out.append((d-a,d,a,k))
out.sort(reverse=True)
print(f'{"ns/req during":>14} {"after":>8} {"diff":>8}  symbol   (total during {sum(cs[0].values())/999/ns[0]*1e9:.0f} after {sum(cs[1].values())/999/ns[1]*1e9:.0f})')
for diff,d,a,k in out[:30]: print(f'{d:14.0f} {a:8.0f} {diff:8.0f}  {k[:110]}')
