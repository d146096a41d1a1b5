import os, time, random, resource
path='/tmp/s29/wfile'
if os.path.exists(path): os.remove(path)
fd=os.open(path, os.O_RDWR|os.O_CREAT, 0o644)
size=1<<30
os.ftruncate(fd, size)          # sparse, as redb grows its file
page=b'x'*4096
random.seed(1)
def run(name, n, chunk_pages, sequential):
    r0=resource.getrusage(resource.RUSAGE_SELF); t0=time.time()
    buf=page*chunk_pages
    for i in range(n):
        if sequential: off=(i*chunk_pages*4096) % (size - len(buf))
        else: off=random.randrange(0, (size-len(buf))//4096)*4096
        os.pwrite(fd, buf, off)
    os.fdatasync(fd)
    r1=resource.getrusage(resource.RUSAGE_SELF)
    pages=n*chunk_pages
    print(f"{name}: {pages} pages, {(r1.ru_stime-r0.ru_stime)/pages*1e6:.2f} us sys/page, {(time.time()-t0)/pages*1e6:.2f} us wall/page")
run('4 KiB random, fresh sparse file', 20000, 1, False)
run('4 KiB random, same file again (blocks allocated)', 20000, 1, False)
run('64 KiB (16 pages) random', 2000, 16, False)
run('4 KiB sequential', 20000, 1, True)
os.close(fd); os.remove(path)
