#!/bin/bash
# (Copied from ../point-index/.) Issue 4's recovery of >= 2 GB of checkpoint + log, two builds alternating, each on a fresh copy,
# page cache evicted first (--cold), with the read-like-cat comparison.
#   usage: recover-2g.sh BASE_BIN NEW_BIN ROUNDS SRC_DIR WORK_DIR
set -euo pipefail
base=$1; new=$2; rounds=$3; src=$4; work=$5
for r in $(seq 1 "$rounds"); do
  if [ $((r % 2)) = 1 ]; then order="base new"; else order="new base"; fi
  for which in $order; do
    bin=$base; [ "$which" = new ] && bin=$new
    rm -rf "$work"; cp -r "$src" "$work"; sync
    out=$(/usr/bin/time -f 'user %U sys %S rss_kb %M' "$bin" recover --log-dir "$work" --cold --compare-read 2>&1)
    echo "$r $which $(echo "$out" | grep -E '^(read like cat|checkpoint|log replay|total|ratio|user)' | tr -s ' ' | cut -c1-110 | tr '\n' '|')"
  done
done
rm -rf "$work"
