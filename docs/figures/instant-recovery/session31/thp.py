import mmap, time, sys
def touch(huge):
    n = 2000 << 20
    m = mmap.mmap(-1, n, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    if huge:
        m.madvise(mmap.MADV_HUGEPAGE)
    t = time.time()
    for off in range(0, n, 4096):
        m[off] = 1
    dt = time.time() - t
    m.close()
    return dt
for huge in [int(a) for a in sys.argv[1:]]:
    time.sleep(5)
    print("huge" if huge else "small", f"{touch(huge):.2f} s", flush=True)
