#!/usr/bin/env bash
# Runs the randomized history test for as long as asked, against real
# masters and two real proxy processes (faults/history_test.go):
#
#   bash scripts/faults.sh [duration] [seed]     # e.g. 10m; the default seed comes from the clock
#
# It prints the seed; the same seed draws the same choices again (the
# timings differ). It fails on any two holders of a lock at once.
set -euo pipefail
cd "$(dirname "$0")/.."
duration="${1:-10m}"
seed="${2:-0}"
bash scripts/deps.sh >/dev/null
export PATH="$PATH:/usr/local/go/bin"
exec go test ./faults -run '^TestHistory$' -count=1 -timeout 0 -v -args -history.duration="$duration" -history.seed="$seed"
