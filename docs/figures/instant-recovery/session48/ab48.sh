#!/bin/bash
# ab48.sh ROUNDS WORK BIN_A BIN_B [extra instant-bench args]: per round, AILIR restarts with
# BIN_A, then BIN_B, then Redis (AOF everysec); 5 M keys, read-only, 200 clients, 15 s.
rounds=$1; work=$2; a=$3; b=$4; shift 4
run() { # BIN TARGETS LABEL
  "$1" instant-bench --keys 5000000 --targets "$2" --workloads read-only --clients 200 --duration-s 15 \
    --settle-s 15 --out "$work/ab" "${@:4}" 2>&1 | grep -E "instant-bench: (ailir|redis)" | sed "s/^/round $r $3: /"
  rm -rf "$work"/ab/image-*
}
for r in $(seq 1 "$rounds"); do
  run "$a" ailir "$(basename "$a")" "$@"
  run "$b" ailir "$(basename "$b")" "$@"
  run "$a" redis-everysec redis
done
