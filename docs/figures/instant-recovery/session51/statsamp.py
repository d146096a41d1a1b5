import time,sys
end=time.monotonic()+float(sys.argv[1])
out=open(sys.argv[2],'w')
while time.monotonic()<end:
    f=open('/proc/stat').readline().split()
    out.write(f"{time.monotonic()*1000:.1f} {' '.join(f[1:9])}\n")
    time.sleep(0.01)
