import re, sys, subprocess
def load(f, n):
    out=subprocess.run(['callgrind_annotate','--threshold=100','--auto=no',f],capture_output=True,text=True).stdout
    d={}
    for l in out.split('\n'):
        m=re.match(r'\s*([\d,]+) \(\s*[\d.]+%\)\s+(\S.*)',l)
        if not m: continue
        v=int(m.group(1).replace(',',''))
        name=m.group(2)
        name=re.sub(r' \[.*\]$','',name)
        name=re.sub(r'^[^:]*:','',name)
        d[name]=d.get(name,0)+v/n
    for k in ['PROGRAM TOTALS','events annotated']: d.pop(k,None)
    return d
a=load(sys.argv[1], float(sys.argv[3])); b=load(sys.argv[2], float(sys.argv[3]))
keys=set(a)|set(b)
diff=sorted(keys,key=lambda k: b.get(k,0)-a.get(k,0))
print("total %.0f -> %.0f"%(sum(a.values()),sum(b.values())))
N=int(sys.argv[4]) if len(sys.argv)>4 else 12
for k in diff[:N]: print("%8.1f %8.1f %8.1f  %s"%(a.get(k,0),b.get(k,0),b.get(k,0)-a.get(k,0),k[:120]))
print('...')
for k in diff[-N:]: print("%8.1f %8.1f %8.1f  %s"%(a.get(k,0),b.get(k,0),b.get(k,0)-a.get(k,0),k[:120]))
