#!/usr/bin/env python3
"""CPU cost of writing through the page cache vs O_DIRECT (docs/io.md, "Direct writes").

Writes 2 GiB in 4 MiB pwrites from an aligned buffer, fdatasync every 40 MiB and at the end,
and prints wall time, user and system CPU. Usage: pwrite.py buffered|direct [DIR]
(DIR must be on the file system measured; /dev/shm refuses O_DIRECT).
"""
import mmap
import os
import resource
import sys
import time

mode = sys.argv[1]
path = os.path.join(sys.argv[2] if len(sys.argv) > 2 else ".", f"pwrite-{mode}.tmp")
size, total = 4 << 20, 2 << 30
buf = mmap.mmap(-1, size)  # page-aligned, as O_DIRECT needs
buf.write(os.urandom(size))
flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | (os.O_DIRECT if mode == "direct" else 0)
fd = os.open(path, flags, 0o644)
r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.time()
for n, off in enumerate(range(0, total, size), 1):
    os.pwrite(fd, buf, off)
    if n % 10 == 0:
        os.fdatasync(fd)
os.fdatasync(fd)
r1, t1 = resource.getrusage(resource.RUSAGE_SELF), time.time()
os.close(fd)
os.unlink(path)
print(f"{mode}: wall {t1 - t0:.2f} s, user {r1.ru_utime - r0.ru_utime:.2f} s, "
      f"sys {r1.ru_stime - r0.ru_stime:.2f} s, {total / (t1 - t0) / 1e6:.0f} MB/s")
