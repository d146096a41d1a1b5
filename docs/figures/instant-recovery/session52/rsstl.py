import subprocess,sys,time,socket,shutil,os
bin_,image,port=sys.argv[1],sys.argv[2],int(sys.argv[3])
extra=sys.argv[4:]
shutil.rmtree('/tmp/s52/cpr',ignore_errors=True); shutil.copytree(image,'/tmp/s52/cpr'); os.sync()
t0=time.monotonic()
p=subprocess.Popen([bin_,'serve','--dir','/tmp/s52/cpr','--durability','indexed','--port',str(port)]+extra,stdout=subprocess.DEVNULL,stderr=subprocess.DEVNULL)
rows=[];listen=None;reply=None;s=None
while time.monotonic()-t0<3.0:
    try:
        st=open(f'/proc/{p.pid}/status').read()
        anon=[l for l in st.splitlines() if l.startswith('RssAnon')][0].split()[1]
        thr=[l for l in st.splitlines() if l.startswith('Threads')][0].split()[1]
        rows.append(((time.monotonic()-t0)*1000,int(anon)//1024,int(thr)))
    except Exception: pass
    if listen is None:
        try:
            s=socket.create_connection(('127.0.0.1',port),timeout=0.5); listen=(time.monotonic()-t0)*1000
            s.sendall(b'*2\r\n$3\r\nGET\r\n$5\r\nkey:7\r\n'); s.setblocking(False)
        except OSError: pass
    elif reply is None:
        try:
            if s.recv(100): reply=(time.monotonic()-t0)*1000
        except BlockingIOError: pass
    time.sleep(0.0005)
print('listen_ms',listen,'reply_ms',reply)
last=None
for t,a,th in rows:
    if last is None or a!=last[1] or th!=last[2] or t>=(listen or 0) and t<(listen or 0)+2:
        print(f'{t:7.1f} ms anon {a:5d} MiB threads {th}')
    last=(t,a,th)
p.kill(); p.wait()
