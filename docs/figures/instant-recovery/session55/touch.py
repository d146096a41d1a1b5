import mmap, time, resource, sys
def run(huge, gb=1):
    n = gb << 30
    m = mmap.mmap(-1, n, flags=mmap.MAP_PRIVATE|mmap.MAP_ANONYMOUS)
    m.madvise(mmap.MADV_HUGEPAGE if huge else mmap.MADV_NOHUGEPAGE)
    r0 = resource.getrusage(resource.RUSAGE_SELF); t0 = time.time()
    for off in range(0, n, 4096):
        m[off] = 1
    t1 = time.time(); r1 = resource.getrusage(resource.RUSAGE_SELF)
    m.close()
    return f"{t1-t0:.3f}"
for i in range(3):
    time.sleep(6); h = run(True)
    time.sleep(6); s = run(False)
    print("after 6 s idle: huge", h, "small", s, flush=True)
