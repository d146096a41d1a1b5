#!/bin/bash
# usage: rec-value-ab.sh ROUNDS BIN_A BIN_B DIR [extra recover args]: value recovery of a fresh copy of DIR, binaries alternating
set -uo pipefail
rounds=$1; a=$2; b=$3; src=$4; shift 4
work=$(mktemp -d /tmp/recab.XXXX); trap 'rm -rf "$work"' EXIT
for r in $(seq 1 "$rounds"); do
  if [ $((r % 2)) = 1 ]; then order="$a $b"; else order="$b $a"; fi
  for bin in $order; do
    rm -rf "$work/c"; cp -r "$src" "$work/c"; sync
    out=$(/usr/bin/time -f 'user %U sys %S rss_kb %M' "$bin" recover --log-dir "$work/c" --threads 2 "$@" 2>&1)
    ck=$(echo "$out" | awk '$1=="checkpoint" && $2 ~ /^[0-9]/{print $2}'); lr=$(echo "$out" | awk '/^log replay/{print $3}'); tot=$(echo "$out" | awk '/^total/{print $2}')
    echo "$r $(basename $bin) checkpoint $ck replay $lr total $tot $(echo "$out" | grep '^user')"
  done
done
