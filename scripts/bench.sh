#!/usr/bin/env bash
# Measures redlock-proxy against go-redsync, a single Redis and twemproxy on
# this machine and prints one markdown table of ratios (see bench/main.go).
# Installs redis-server, redis-tools (redis-benchmark) and nutcracker with
# apt-get when they are missing. Arguments go to the benchmark, for example:
#   bash scripts/bench.sh -duration 5s -reps 3
# Everything listens on 127.0.0.1 and stops by itself (-timeout, default 10m).
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""
[ "$(id -u)" = 0 ] || SUDO=sudo
missing=()
for p in redis-server redis-tools nutcracker; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  export DEBIAN_FRONTEND=noninteractive
  if [[ " ${missing[*]} " == *" nutcracker "* ]] && ! apt-cache policy nutcracker 2>/dev/null | grep -q 'Candidate: [0-9]'; then
    $SUDO apt-get update -qq
  fi
  if ! apt-cache policy nutcracker 2>/dev/null | grep -q 'Candidate: [0-9]'; then
    echo "nutcracker (twemproxy) has no installable candidate in apt; row 4 needs it" >&2
  fi
  echo "installing: ${missing[*]}" >&2
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# Debian's packages start services on 6379 and 22121 that the benchmark does
# not use; it starts its own processes on free ports.
if command -v systemctl >/dev/null; then
  for s in redis-server nutcracker; do
    systemctl is-active --quiet "$s" 2>/dev/null && { systemctl stop "$s" || true; }
  done
fi

export PATH="$PATH:/usr/local/go/bin"
command -v go >/dev/null || { echo "Go is needed (https://go.dev/dl/)" >&2; exit 1; }
export BENCH_COMMAND="bash scripts/bench.sh${*:+ $*}"
exec go run ./bench "$@"
