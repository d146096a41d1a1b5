#!/bin/bash
# usage: scale.sh ROUNDS SRC BIN; SRC made by the two bench commands of docs/PERFORMANCE.md, "Recovery of >= 2 GB" (14 M records); alternates --threads 2 and 1, each on a fresh copy, page cache evicted, with the cat-like read first
R=$1; S=$2; B=$3
for r in $(seq $R); do for t in 2 1; do
  rm -rf wv && cp -r $S wv && sync
  echo "== round $r threads $t"
  /usr/bin/time -f "TIME user %U sys %S wall %e rss_kb %M" $B recover --log-dir wv --threads $t --cold --compare-read 2>&1 | grep -v "^ *$"
done; done
