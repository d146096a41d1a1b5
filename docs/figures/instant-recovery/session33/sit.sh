#!/bin/bash
out=/tmp/s33/sit1.txt
/tmp/s33/laz-drv instant-bench --keys 5000000 --targets redis-everysec --workloads read-only --clients 200 --duration-s 15 --settle-s 15 --out /tmp/s33/redis-ro 2>&1 | grep "redis.*first reply" | tee -a $out
rm -rf /tmp/s33/redis-ro/image-*
./ab.sh $out 1 "laz-shim"
./ab.sh $out 1 "laz-shim" --restore-walkers 2
./ab.sh $out 1 "laz-shim" --restore-walkers 3
./ab.sh $out 1 "laz-shim"
./ab.sh $out 1 "laz-shim" --restore-walkers 2
