#!/usr/bin/env python3
"""Samples per-thread CPU (utime+stime ticks) of every `lazarus serve` process every 0.5 s;
prints, per sample, time and a dict comm -> cumulative seconds (grouped by name prefix)."""
import os, sys, time, re, json
tick = os.sysconf('SC_CLK_TCK')
out = open(sys.argv[1], 'w')
end = time.time() + float(sys.argv[2])
t0 = time.time()
while time.time() < end:
    for pid in os.listdir('/proc'):
        if not pid.isdigit(): continue
        try:
            cmd = open(f'/proc/{pid}/cmdline','rb').read().split(b'\0')
        except Exception: continue
        if len(cmd) < 2 or b'serve' not in cmd[1:3]: continue
        groups = {}
        try:
            for tid in os.listdir(f'/proc/{pid}/task'):
                st = open(f'/proc/{pid}/task/{tid}/stat').read()
                comm = st[st.index('(')+1:st.rindex(')')]
                f = st[st.rindex(')')+2:].split()
                u, s = int(f[11]), int(f[12])
                g = re.sub(r'-?\d+$', '', comm)
                a = groups.setdefault(g, [0.0, 0.0, 0])
                a[0] += u / tick; a[1] += s / tick; a[2] += 1
        except Exception: continue
        out.write(json.dumps({'t': round(time.time()-t0, 2), 'pid': pid, 'g': groups}) + '\n'); out.flush()
    time.sleep(0.5)
