# Model of read-only serving during an instant restore (docs/PERFORMANCE.md, session 34/35):
# machine of 2 cores; walk takes s(p) cores when fraction p is restored; the rest serves requests,
# each costing q core-µs, plus c core-µs more when it misses (probability 1-p, uniform keys).
# W: walk core-seconds for all keys. Returns (restore time T, during/after ratio).
import math
def run(share_of_p, W=3.5, q=13.0/2*2, c=12.3, cores=2.0, n=20000):
    # q: core-µs per request at steady state: after-rate r = cores/q per µs
    T=0.0; served=0.0
    for i in range(n):
        p=(i+0.5)/n
        s=share_of_p(p)*cores
        dt=W/n/s              # seconds to walk dp
        serve_cores=cores-s
        cost=q+(1-p)*c        # core-µs per request
        served+=serve_cores/cost*dt   # requests per µs * s  (units cancel in ratio)
        T+=dt
    after=cores/q
    return T, served/T/after
def linear(a,b): return lambda p: a+(b-a)*p
base=lambda p:0.35
T0,r0=run(base); print(f"constant 0.35: T={T0:.2f}s ratio={r0:.3f}")
# harmonic-preserving linear schedules: find a for given end b so T equals T0
for c in (12.3,17.0):
  print("miss cost",c)
  T0,r0=run(base,c=c); print(f"  constant 0.35: T={T0:.2f}s ratio={r0:.3f}")
  for b in (0.30,0.25,0.2,0.15,0.1):
    lo,hi=0.35,1.0
    for _ in range(60):
        a=(lo+hi)/2
        T,_r=run(linear(a,b),c=c)
        if T>T0: lo=a
        else: hi=a
    T,r=run(linear(a,b),c=c)
    print(f"  linear {a:.3f}->{b:.2f}: T={T:.2f}s ratio={r:.3f}")
  # two-step
  for a_frac in (0.2,0.3,0.4,0.5):
    for s1 in (0.5,0.6,0.75,0.9):
        # s2 so T equal: a/s1 + (1-a)/s2 = 1/0.35
        rem=1/0.35-a_frac/s1
        if rem<=0: continue
        s2=(1-a_frac)/rem
        T,r=run(lambda p,a=a_frac,s1=s1,s2=s2: s1 if p<a else s2,c=c)
        print(f"  step {s1:.2f} until {a_frac:.1f} then {s2:.3f}: T={T:.2f} ratio={r:.3f}")
