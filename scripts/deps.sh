#!/usr/bin/env bash
# Installs, where it is missing, what redlock-proxy needs:
#
#   bash scripts/deps.sh run    # running it (scripts/run.sh): Debian's
#                               # redis-server and redis-tools (redis-cli),
#                               # and a check that Go is there; the build
#                               # fetches the Go modules it needs
#   bash scripts/deps.sh test   # testing it (scripts/test.sh; the default):
#                               # the above, the Python and PHP Redis
#                               # clients the compatibility tests drive,
#                               # headless Chromium for the status page's
#                               # test, Node with the npm packages of
#                               # compat/node, and every Go module
set -euo pipefail
cd "$(dirname "$0")/.."
what="${1:-test}"
case "$what" in
  run | test) ;;
  *) echo "usage: bash scripts/deps.sh [run|test]" >&2; exit 2 ;;
esac

pkgs=(redis-server redis-tools)
if [ "$what" = test ]; then
  pkgs+=(python3-redis python3-pytest php-cli php-redis php-illuminate-cache php-illuminate-redis php-symfony-lock)
  # Headless Chromium renders the status page in its test.
  pkgs+=(chromium)
fi
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

export PATH="$PATH:/usr/local/go/bin"
command -v go >/dev/null || { echo "Go is needed (https://go.dev/dl/)"; exit 1; }
[ "$what" = test ] || exit 0

# Node lock libraries for the compatibility suite, from the npm registry.
if ! command -v npm >/dev/null; then
  $SUDO apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
fi
(cd compat/node && npm ci --no-audit --no-fund --loglevel=error)

go mod download
(cd compat/gozero && go mod download)
