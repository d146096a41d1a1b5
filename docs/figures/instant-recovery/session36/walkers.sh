#!/bin/bash
# alternating read-only runs with the new defaults and --restore-walkers N
out=$1; rounds=$2; ws=$3
for r in $(seq 1 $rounds); do for w in $ws; do
  EXTRA="--restore-walkers $w" BIN=${BIN:-target/release/lazarus} docs/figures/instant-recovery/session36/ab.sh ${WORK:-/tmp/s36}/w-tmp.txt 1 "-:-" >/dev/null 2>&1
  tail -1 ${WORK:-/tmp/s36}/w-tmp.txt | sed "s/^S=- F=- round 1/walkers=$w round $r/"
  mv ${WORK:-/tmp/s36}/w-tmp.txt.d/-:--1.csv ${WORK:-/tmp/s36}/w-tmp.txt.d/w$w-$r.csv
done; done | tee -a $out
