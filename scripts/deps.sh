#!/usr/bin/env bash
# Installs what running and testing redlock-proxy needs, where it is missing:
# Debian's redis-server and redis-tools, the Python and PHP Redis clients the
# compatibility tests drive, and the Go modules.
set -euo pipefail
cd "$(dirname "$0")/.."

pkgs=(redis-server redis-tools python3-redis python3-pytest php-cli php-redis php-illuminate-cache php-illuminate-redis php-symfony-lock)
# Headless Chromium renders the status page in its test.
pkgs+=(chromium)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
SUDO=""
[ "$(id -u)" = 0 ] || SUDO=sudo
if ((${#missing[@]})); then
  echo "installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# Debian's package starts a redis-server on 6379 that nothing here uses.
if command -v systemctl >/dev/null && systemctl is-active --quiet redis-server 2>/dev/null; then
  systemctl stop redis-server || true
fi

# Node lock libraries for the compatibility suite, from the npm registry.
if ! command -v npm >/dev/null; then
  ${SUDO:-} apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
fi
(cd compat/node && npm ci --no-audit --no-fund --loglevel=error)

export PATH="$PATH:/usr/local/go/bin"
command -v go >/dev/null || { echo "Go is needed (https://go.dev/dl/)"; exit 1; }
go mod download
