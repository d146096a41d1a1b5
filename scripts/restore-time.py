#!/usr/bin/env python3
"""Time an unloaded restart of `lazarus serve` on a copy of a crash image (docs/PERFORMANCE.md,
"Instant recovery", "Session 12").

usage: scripts/restore-time.py LAZARUS_BIN IMAGE_DIR DURABILITY [PORT]

Copies IMAGE_DIR (e.g. an `instant-bench` crash image) to IMAGE_DIR.copy, syncs, starts the
server on it, and prints the time to the first PING reply, the time until `INFO recovery` says
`recovery_state:done` (polled every 20 ms), and the process's user and system CPU, minor faults
and resident memory at that moment. The server is killed afterwards."""
import os
import shutil
import socket
import subprocess
import sys
import time


def command(sock, *args):
    sock.sendall(b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args))
    data = b""
    while True:
        chunk = sock.recv(1 << 20)
        if not chunk:
            raise SystemExit("restore-time: the server closed the connection")
        data += chunk
        if data.startswith(b"$"):
            head = data.index(b"\r\n")
            n = int(data[1:head])
            if n < 0 or len(data) >= head + 2 + n + 2:
                return data
        elif data.endswith(b"\r\n"):
            return data


def main():
    if len(sys.argv) < 4:
        raise SystemExit(__doc__)
    exe, image, durability = sys.argv[1:4]
    port = int(sys.argv[4]) if len(sys.argv) > 4 else 7400
    work = image.rstrip("/") + ".copy"
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(image, work)
    os.sync()
    started = time.time()
    server = subprocess.Popen([exe, "serve", "--port", str(port), "--dir", work, "--durability", durability],
                              stderr=subprocess.DEVNULL)
    try:
        while True:
            try:
                sock = socket.create_connection(("127.0.0.1", port))
                break
            except OSError:
                if server.poll() is not None:
                    raise SystemExit("restore-time: the server exited")
                time.sleep(0.002)
        command(sock, b"PING")
        first = time.time() - started
        while b"recovery_state:done" not in command(sock, b"INFO", b"recovery"):
            time.sleep(0.02)
        done = time.time() - started
        stat = open(f"/proc/{server.pid}/stat").read().rsplit(")", 1)[1].split()
        tick = os.sysconf("SC_CLK_TCK")
        user, system, minflt = int(stat[11]) / tick, int(stat[12]) / tick, stat[7]
        rss = [l for l in open(f"/proc/{server.pid}/status") if l.startswith("VmRSS")][0].split()[1]
        print(f"{durability}: first reply {first * 1e3:.0f} ms, recovered {done * 1e3:.0f} ms, "
              f"user {user:.2f} s, system {system:.2f} s, minor faults {minflt}, resident {int(rss) // 1024} MiB")
    finally:
        server.kill()
        server.wait()
        shutil.rmtree(work, ignore_errors=True)


main()
