#!/bin/bash
out=/tmp/s33/sit3.txt
redis() { /tmp/s33/laz-drv instant-bench --keys 5000000 --targets redis-everysec --workloads read-only --clients 200 --duration-s 15 --settle-s 15 --out /tmp/s33/redis-ro 2>&1 | grep "redis.*first reply" | tee -a $out; rm -rf /tmp/s33/redis-ro/image-*; }
redis
./ab.sh $out 1 "laz-run6" --restore-walkers 2
./ab.sh $out 1 "laz-run6"
./ab.sh $out 1 "laz-run6" --restore-walkers 2
redis
./ab.sh $out 1 "laz-run6" --restore-walkers 3
./ab.sh $out 1 "laz-run6" --restore-walkers 2
