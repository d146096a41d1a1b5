import subprocess,sys,time,socket,shutil,os
image=sys.argv[1]; rounds=int(sys.argv[2]); bins=sys.argv[3:]
port=18650
for r in range(rounds):
    for b in bins:
        d='/tmp/s52/cpf'
        subprocess.run(['rm','-rf',d]); subprocess.run(['cp','-r',image,d]); os.sync()
        port+=1
        t0=time.monotonic()
        p=subprocess.Popen([b,'serve','--dir',d,'--durability','indexed','--port',str(port)],stdout=subprocess.DEVNULL,stderr=subprocess.DEVNULL)
        listen=reply=None; s=None
        while time.monotonic()-t0<5 and reply is None:
            if listen is None:
                try:
                    s=socket.create_connection(('127.0.0.1',port),timeout=5); listen=(time.monotonic()-t0)*1000
                    s.sendall(b'*1\r\n$4\r\nPING\r\n')
                    s.recv(100); reply=(time.monotonic()-t0)*1000
                except OSError: time.sleep(0.0005)
        print(f'round {r} {os.path.basename(b)} connected {listen:.1f} ms reply {reply:.1f} ms', flush=True)
        p.kill(); p.wait()
