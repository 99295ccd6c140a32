#!/usr/bin/env bash
# Starts three local Redis masters (7001-7003), the application's own Redis
# (7000: the proxy's passthrough backend, where everything that is not a
# lock lives) and redlock-proxy on 127.0.0.1:6380 in front of them, with
# config.toml, and its status page and metrics on http://127.0.0.1:9380/.
# Ctrl-C stops all five.
#
# The masters persist every write (appendonly yes, appendfsync always), so a
# restarted master remembers its locks, and the proxy, which checks that it
# did (its record survived, see redlock/evidence.go), lets it vote at once.
# Masters created here for the first time are declared a new deployment
# (-init-masters), so that the restart guard does not hold them back for
# restart_guard_window at the first start.
#
# It installs only what running needs (redis-server, redis-tools, and checks
# for Go: scripts/deps.sh run); the test tools come with scripts/test.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh run
export PATH="$PATH:/usr/local/go/bin"
# The production binary: no build tags (the unsafeguards tag is for tests).
go build -o bin/redlock-proxy ./cmd/redlock-proxy

data="${REDLOCK_PROXY_DATA:-/tmp/redlock-proxy}"
pids=()
cleanup() { kill "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true; }
trap cleanup EXIT INT TERM
fresh=0
for port in 7001 7002 7003; do
  [ -d "$data/$port" ] || fresh=$((fresh + 1))
  mkdir -p "$data/$port"
  redis-server --port "$port" --bind 127.0.0.1 --dir "$data/$port" --save "" \
    --appendonly yes --appendfsync always --logfile "$data/$port/redis.log" &
  pids+=($!)
done
mkdir -p "$data/7000"
redis-server --port 7000 --bind 127.0.0.1 --dir "$data/7000" --save "" --logfile "$data/7000/redis.log" &
pids+=($!)
for port in 7000 7001 7002 7003; do
  until redis-cli -p "$port" ping >/dev/null 2>&1; do sleep 0.1; done
done
if [ "$fresh" = 3 ]; then
  bin/redlock-proxy -config config.toml -init-masters
fi
echo "masters up on 7001 7002 7003, the application's Redis on 7000; proxy on 127.0.0.1:6380 (try: redis-cli -p 6380 set mylock token NX PX 10000); status page on http://127.0.0.1:9380/"
bin/redlock-proxy -config config.toml -backend 127.0.0.1:7000 -metrics-listen 127.0.0.1:9380 &
pids+=($!)
wait "${pids[@]}"
