#!/usr/bin/env bash
# Runs the randomized history test for as long as asked, against real
# masters and two real proxy processes (faults/history_test.go), with its
# adversarial client (faults/adversary_test.go):
#
#   bash scripts/faults.sh [duration] [seed] [adversary] [weights]   # e.g. 10m; the default seed comes from the clock
#
# adversary is the adversary's actions per second (default: the schedule's,
# 15; 0: none); weights change the full schedule's fault weights
# (e.g. failover=4,failover-pause=4,evict=4). It prints the seed and the configuration drawn from it; the
# same seed draws the same choices again (the timings differ). It fails on
# any two holders of a lock at once, and on a proxy that answers no lock
# operation for 20 s.
#
# With cluster first, it runs the history whose voters are Redis Clusters
# (faults/cluster_test.go: shard primaries wiped, failed over to their
# replicas, slots migrated):
#
#   bash scripts/faults.sh cluster [duration] [seed] [weights]   # e.g. 5m 0 wipe-reshard=4
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh >/dev/null
export PATH="$PATH:/usr/local/go/bin"
if [ "${1:-}" = cluster ]; then
	duration="${2:-5m}"
	seed="${3:-0}"
	weights="${4:-}"
	exec go test ./faults -run '^TestHistoryCluster$' -count=1 -timeout 0 -v -args -history.duration="$duration" -history.seed="$seed" -history.faults="$weights"
fi
duration="${1:-10m}"
seed="${2:-0}"
adversary="${3:--1}"
weights="${4:-}"
exec go test ./faults -run '^TestHistory$' -count=1 -timeout 0 -v -args -history.duration="$duration" -history.seed="$seed" -history.adversary="$adversary" -history.faults="$weights"
