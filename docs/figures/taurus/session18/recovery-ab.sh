#!/bin/bash
# usage: abx.sh LOGDIR ROUNDS BIN_A BIN_B THREADS... : alternating recoveries of fresh copies (warm cache)
src=$1; rounds=$2; A=$3; B=$4; shift 4
for r in $(seq 1 $rounds); do
  for t in "$@"; do
    if [ $((r % 2)) = 1 ]; then order="$A $B"; else order="$B $A"; fi
    for b in $order; do
      rm -rf c; cp -r $src c; sync
      dirs=$(ls -d c/d* | sed 's/^/--log-dir /' | tr '\n' ' ')
      out=$(/usr/bin/time -f 'user %U sys %S rss %M' ./$b recover $dirs --threads $t --cold --from-generation 1 2>&1)
      g1=$(echo "$out" | grep '  generation 1 ' | grep -oE "(read|graph|replay) [0-9.]+ ms" | tr '\n' ' ')
      echo "$r $b ${t}t $g1| $(echo "$out" | grep -E '^total' | awk '{print "total",$2}') $(echo "$out" | grep '^user')"
    done
  done
done
