#!/usr/bin/env bash
# Runs the differential test of the recognised lock scripts for as long as
# asked (scripteq/scripteq_test.go): each built-in script with random
# arguments and prior states, through the proxy binary in front of three
# masters and as its library's Lua on a plain redis-server, replies and
# keys compared.
#
#   bash scripts/scripteq.sh [duration] [seed]     # e.g. 10m; the default seed comes from the clock
#
# It prints the seed; the same seed draws the same cases again. It fails on
# the first ten differences, each printed with its keys, arguments and the
# state before.
set -euo pipefail
cd "$(dirname "$0")/.."
duration="${1:-10m}"
seed="${2:-0}"
bash scripts/deps.sh run >/dev/null
export PATH="$PATH:/usr/local/go/bin"
exec go test ./scripteq -run '^TestScriptsEquivalent$' -count=1 -timeout 0 -v -args -scripteq.duration="$duration" -scripteq.seed="$seed"
