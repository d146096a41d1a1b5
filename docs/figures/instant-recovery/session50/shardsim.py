import bisect, random, sys
SPAN=8
def common(a,b):
    n=0
    while n<min(len(a),len(b)) and a[n]==b[n]: n+=1
    return n
def raw_interp(first,last,parts):
    c=common(first,last)
    w=lambda k:int.from_bytes((k[c:]+b'\0'*8)[:8],'big')
    a,b=w(first),w(last)
    return [first[:c]+(a+(b-a)*i//parts).to_bytes(8,'big') for i in range(1,parts)]
def alpha_interp(first,last,parts,sample):
    c=common(first,last)
    A=[set() for _ in range(SPAN)]
    for k in sample:
        t=k[c:]
        for i in range(min(SPAN,len(t))): A[i].add(t[i])
    A=[sorted(s) for s in A]
    def frac(k):
        t=k[c:]; v=0.0; scale=1.0
        for i in range(SPAN):
            r=len(A[i])+2
            if i<len(t):
                d=1+bisect.bisect_left(A[i],t[i])
            else: d=0
            scale/=r; v+=d*scale
        return v
    fa,fb=frac(first),frac(last)
    cuts=[]
    for j in range(1,parts):
        f=fa+(fb-fa)*j/parts
        key=bytearray(first[:c])
        for i in range(SPAN):
            r=len(A[i])+2
            f*=r; d=int(f); d=min(max(d,0),r-1); f-=d
            if d==0: break
            key.append(A[i][d-1] if d-1<len(A[i]) else 255)
        cuts.append(bytes(key))
    return cuts
def sample_of(keys, first_i, last_i, probes, run):
    # keys sorted
    s=keys[:run]+keys[-run:]
    for p in raw_interp(keys[0],keys[-1],probes):
        i=bisect.bisect_left(keys,p); s+=keys[i:i+run]
    return s
def stats(keys,cuts):
    cuts=sorted(set(cuts))
    cnt={}
    for k in keys:
        i=bisect.bisect_right(cuts,k); cnt[i]=cnt.get(i,0)+1
    v=sorted(cnt.values())
    return f"nonempty {len(v)} median {v[len(v)//2]} max {v[-1]} max/mean {v[-1]/(len(keys)/len(v)):.1f}"
def run(name,keys):
    keys=sorted(keys)
    print(name, "raw:", stats(keys,raw_interp(keys[0],keys[-1],4096)))
    smp=sample_of(keys,0,0,32,64)
    print(name, "alpha:", stats(keys,alpha_interp(keys[0],keys[-1],4096,smp)), "sample", len(smp))
N=int(sys.argv[1]) if len(sys.argv)>1 else 1_000_000
enc=lambda s: b'\x00\x00\x00\x01\x05'+s+b'\x00\x00'
run("key:N", [enc(b"key:%d"%i) for i in range(N)])
run("memtier-N", [enc(b"memtier-%d"%i) for i in range(N)])
run("random16", [enc(bytes(random.getrandbits(8) for _ in range(16))) for i in range(N//10)])
run("int", [b'\x00\x00\x00\x01\x02'+(i*7+(1<<63)).to_bytes(8,'big') for i in range(N)])
run("hex", [enc(b"user:%08x"%random.getrandbits(32)) for i in range(N//5)])
