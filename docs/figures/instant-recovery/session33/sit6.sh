#!/bin/bash
out=/tmp/s33/sit6.txt
gov() { /tmp/s33/laz-drv instant-bench --server-exe /tmp/s33/laz-run7 --keys 5000000 --targets ailir --workloads $2 --clients 200 --duration-s 15 --settle-s 15 --restore-cpu-share $1 --out /tmp/s33/run-gov 2>&1 | grep "ailir.*first reply" | sed "s/^/share $1: /" | tee -a $out; rm -rf /tmp/s33/run-gov/image-*; }
gov 1 read-write
gov 0.5 read-write
gov 1 read-only
gov 0.5 read-only
/tmp/s33/laz-drv instant-bench --keys 5000000 --targets redis-everysec --workloads read-write --clients 200 --duration-s 15 --settle-s 15 --out /tmp/s33/redis-rw 2>&1 | grep "redis.*first reply" | tee -a $out; rm -rf /tmp/s33/redis-rw/image-*
