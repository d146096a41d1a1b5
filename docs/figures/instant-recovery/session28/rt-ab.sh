#!/bin/bash
# Unloaded restore of the same crash image, alternating builds, each after 20 s idle.
for r in 1 2 3; do for b in base thp; do
  sleep 20; echo -n "round $r $b "; python3 /work/main/scripts/restore-time.py /tmp/lazarus-$b out/image-ailir indexed 7420
done; done
