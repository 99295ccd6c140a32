#!/usr/bin/env bash
# Installs, where it is missing, what redlock-proxy needs:
#
#   bash scripts/deps.sh run    # running it (scripts/run.sh): Debian's
#                               # redis-server and redis-tools (redis-cli),
#                               # and a check that Go is there; the build
#                               # fetches the Go modules it needs
#   bash scripts/deps.sh test   # testing it (scripts/test.sh; the default):
#                               # the above, the Python and PHP Redis
#                               # clients and the frameworks (Django's
#                               # cache by django-redis, Laravel's cache)
#                               # the compatibility tests drive (and
#                               # redis-py 6 into .deps/redis-py),
#                               # headless Chromium for the status page's
#                               # test, Lua 5.1 (lua5.1), the oracle of the
#                               # script normaliser's tests, gcc for the
#                               # race detector (go test -race needs cgo),
#                               # Node with the npm packages of
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
  pkgs+=(python3-redis python3-pytest python3-django python3-django-redis php-cli php-redis php-illuminate-cache php-illuminate-redis php-symfony-lock)
  # Headless Chromium renders the status page in its test.
  pkgs+=(chromium)
  # Lua 5.1, the Lua of Redis, compiles the scripts the normaliser's tests
  # compare (proxy/lockscripts).
  pkgs+=(lua5.1)
  # The race detector (go test -race in scripts/test.sh) needs cgo, so a C
  # compiler and the C library's headers.
  pkgs+=(gcc libc6-dev)
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
(cd compat/bsmredislock && go mod download)

# redis-py ≥ 5 for its RESP3 (protocol=3) and client-side caching tests:
# Debian 12's python3-redis is 4.3.4, so the next release's package (pure
# Python) is fetched from the same Debian mirror, by a private apt state
# that leaves the system's sources and lists alone, and unpacked into
# .deps/redis-py, which compat/python_test.go puts on PYTHONPATH.
redispy=.deps/redis-py
if [ ! -d "$redispy/redis" ]; then
  apt_dir=$(mktemp -d)
  mkdir -p "$apt_dir/parts" "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial" "$apt_dir/deb"
  # The system's own Debian source, for the next release's suite.
  src=$(grep -l '^Suites:.*bookworm' /etc/apt/sources.list.d/*.sources 2>/dev/null | head -1 || true)
  if [ -n "$src" ]; then
    awk 'BEGIN { RS = ""; ORS = "\n\n" } !/security/' "$src" | sed 's/^Suites:.*/Suites: trixie/' >"$apt_dir/parts/next.sources"
  else
    uri=$(awk '$1 == "deb" && $3 == "bookworm" { print $2; exit }' /etc/apt/sources.list)
    echo "deb $uri trixie main" >"$apt_dir/parts/next.list"
  fi
  touch "$apt_dir/none.list"
  apt_opts=(-qq -o Dir::Etc::SourceList="$apt_dir/none.list" -o Dir::Etc::SourceParts="$apt_dir/parts"
    -o Dir::State::Lists="$apt_dir/lists" -o Dir::Cache="$apt_dir/cache" -o APT::Sandbox::User=root)
  apt-get "${apt_opts[@]}" update
  (cd "$apt_dir/deb" && apt-get "${apt_opts[@]}" download python3-redis)
  mkdir -p "$apt_dir/x" .deps
  dpkg-deb -x "$apt_dir"/deb/python3-redis_*.deb "$apt_dir/x"
  rm -rf "$redispy"
  mv "$apt_dir/x/usr/lib/python3/dist-packages" "$redispy"
  rm -rf "$apt_dir"
fi
