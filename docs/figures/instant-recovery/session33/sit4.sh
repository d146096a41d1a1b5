#!/bin/bash
out=/tmp/s33/sit4.txt
redis() { /tmp/s33/laz-drv instant-bench --keys 5000000 --targets redis-everysec --workloads read-only --clients 200 --duration-s 15 --settle-s 15 --out /tmp/s33/redis-ro 2>&1 | grep "redis.*first reply" | tee -a $out; rm -rf /tmp/s33/redis-ro/image-*; }
gov() { /tmp/s33/laz-drv instant-bench --server-exe /tmp/s33/laz-run7 --keys 5000000 --targets ailir --workloads read-only --clients 200 --duration-s 15 --settle-s 15 --restore-cpu-share $1 --out /tmp/s33/run-gov 2>&1 | grep "ailir.*first reply" | sed "s/^/share $1: /" | tee -a $out; rm -rf /tmp/s33/run-gov/image-*; }
redis
gov 0.5
gov 0.4
gov 0.5
gov 0.4
redis
