#!/usr/bin/env bash
# Runs the randomized differential test of transparency for as long as
# asked (proxy/transparency_test.go): the same random command sequences to
# a plain redis-server and through the proxy, compared reply for reply, in
# each of its configurations in turn (the duration is each one's): voting
# backend, backend of its own, every key a lock key, and the last two again
# with a Redis Cluster of three primaries as the backend.
#
#   bash scripts/transparency.sh [duration] [seed]     # e.g. 10m; the default seed comes from the clock
#
# It prints the seed; the same seed draws the same sequences again. It fails
# on any reply that differs, but those docs/commands.md lists.
set -euo pipefail
cd "$(dirname "$0")/.."
duration="${1:-10m}"
seed="${2:-0}"
bash scripts/deps.sh >/dev/null
export PATH="$PATH:/usr/local/go/bin"
exec go test ./proxy -run '^TestTransparency$' -count=1 -timeout 0 -v -args -transparency.duration="$duration" -transparency.seed="$seed"
