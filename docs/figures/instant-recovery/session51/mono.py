import re,sys
t0=None
for l in open(sys.argv[1]):
    m=re.match(r'bench restart at ([\d.]+)',l)
    if m: t0=float(m.group(1)); out=[]; continue
    m=re.match(r'trace\s+([\d.]+) ms (.*?) rss',l)
    if m and t0: out.append(f"{m.group(2).split()[0]} {float(m.group(1))-t0:.1f}"); continue
    m=re.match(r'bench first reply at ([\d.]+)',l)
    if m and t0: out.append(f"CLIENT {float(m.group(1))-t0:.1f}"); print(" | ".join(out)); continue
