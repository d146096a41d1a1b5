#!/bin/bash
# ab.sh ROUNDS EXPERIMENT BIN... : alternate the bench binaries, REPLAY_RUNS=3
rounds=$1; exp=$2; shift 2
for r in $(seq 1 $rounds); do
  for b in "$@"; do
    echo "== round $r $b $(date +%T)"
    REPLAY_INITIAL_ROWS=1000000 REPLAY_TXNS=100000 REPLAY_RUNS=3 REPLAY_LOG_DIR=${REPLAY_LOG_DIR:-/tmp/s45/rl} $b "$exp" 2>&1 | grep "^| $exp"
  done
done
