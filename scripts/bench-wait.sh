#!/usr/bin/env bash
# What redlock.wait_replicas costs: acquire throughput through two proxies,
# wait_replicas = 0 and 1, in front of the same three masters, each with one
# replica on loopback; redis-benchmark SET NX PX (50 clients, random keys),
# alternating, for as many repetitions as asked (default 4):
#
#   bash scripts/bench-wait.sh [reps]
#
# Ports 17101-17103 (masters), 17201-17203 (replicas), 17300-17301 (proxies).
set -euo pipefail
cd "$(dirname "$0")/.."
reps="${1:-4}"
bash scripts/deps.sh run >/dev/null
export PATH="$PATH:/usr/local/go/bin"
d="$(mktemp -d)"
go build -o "$d/proxy" ./cmd/redlock-proxy
pids=()
cleanup() { kill "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$d"; }
trap cleanup EXIT INT TERM
for i in 1 2 3; do
  m=$((17100 + i)) r=$((17200 + i))
  redis-server --port $m --bind 127.0.0.1 --save "" --dir "$d" --dbfilename "m$i.rdb" --repl-diskless-sync-delay 0 --logfile "$d/m$i.log" &
  pids+=($!)
  redis-server --port $r --bind 127.0.0.1 --save "" --dir "$d" --dbfilename "r$i.rdb" --replicaof 127.0.0.1 $m --logfile "$d/r$i.log" &
  pids+=($!)
done
for p in 17101 17102 17103 17201 17202 17203; do
  until redis-cli -p $p ping >/dev/null 2>&1; do sleep 0.1; done
done
for w in 0 1; do
  cat >"$d/c$w.toml" <<TOML
[proxy]
listen = "127.0.0.1:1730$w"
backend = "127.0.0.1:17101"
lock_keys = ["lock:*"]
[redlock]
masters = ["127.0.0.1:17101", "127.0.0.1:17102", "127.0.0.1:17103"]
restart_guard = false
wait_replicas = $w
TOML
  "$d/proxy" -config "$d/c$w.toml" >"$d/p$w.log" 2>&1 &
  pids+=($!)
done
for p in 17300 17301; do
  until redis-cli -p $p ping >/dev/null 2>&1; do sleep 0.1; done
done
for rep in $(seq "$reps"); do
  for w in 0 1; do
    printf "wait_replicas=%s rep %s: " $w "$rep"
    redis-benchmark -p 1730$w -c 50 -n 60000 -r 1000000 -q SET 'lock:__rand_int__' v NX PX 2000 | tr '\r' '\n' | grep -v '^$' | tail -1
  done
done
for w in 0 1; do
  printf "proxy wait_replicas=%s: NOQUORUM replies " $w
  redis-cli -p 1730$w info | tr -d '\r' | grep '^acquires_no_quorum:' | cut -d: -f2
done
