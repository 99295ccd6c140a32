#!/usr/bin/env bash
# Runs the whole test suite: unit tests, tests against real redis-server
# masters, the real proxy binary and real client libraries, the fault and
# load suites, and each fuzz target briefly; first formatting, go vet, a tidy
# go.mod and staticcheck, for the root module and the test-only modules. It first installs what the tests need where it is
# missing (scripts/deps.sh test: Redis, the Python, PHP and Node clients,
# Chromium, the Go modules).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh test
export PATH="$PATH:/usr/local/go/bin"
unformatted=$(gofmt -l .)
if [ -n "$unformatted" ]; then echo "not gofmt-ed: $unformatted"; exit 1; fi
# The root module, then the modules of tests whose client libraries bring
# dependencies the proxy must not have (compat/gozero), or another version
# of a library the root module tests (compat/bsmredislock: bsm/redislock
# 0.10; the root module has 0.9.4).
modules=(. compat/gozero compat/bsmredislock)
for m in "${modules[@]}"; do
  (
    cd "$m"
    go vet ./...
    if ! go mod tidy -diff >/dev/null; then echo "$m: go.mod or go.sum is not tidy:"; go mod tidy -diff; exit 1; fi
    go run honnef.co/go/tools/cmd/staticcheck@v0.6.1 ./...
  )
done
# The binary the negative controls build, whose guards can be switched off
# (the unsafeguards tag; the production binary above has no such switch).
go vet -tags unsafeguards ./cmd/redlock-proxy
go run honnef.co/go/tools/cmd/staticcheck@v0.6.1 -tags unsafeguards ./cmd/redlock-proxy
# The root module's packages whose code runs concurrently in the test
# process run under the race detector; the others (the binary's tests: the
# client, fault and load suites and the rest, which run the proxy as a
# process built without -race) run without it. Both go test runs at once:
# the tests mostly wait on timers and the network, and one after the other
# would not fit CI's time. A race-built test binary is slower: the few
# tests that measure under load skip themselves under it
# (redistest.RaceEnabled).
race_pkgs=(./proxy ./proxy/backend ./proxy/wire ./proxy/admin ./proxy/lockscripts ./proxy/quorum ./redlock ./redlock/engine
  ./internal/peek ./internal/sock ./internal/redistest)
mapfile -t plain_pkgs < <(go list ./... | grep -vxF -f <(go list "${race_pkgs[@]}"))
# The race-built test binaries first (an instrumented build of the standard
# library and every dependency: minutes of CPU with an empty build cache),
# so that the build does not compete with the tests that run meanwhile.
if ! out=$(go test -race -count=1 -run '^$' "${race_pkgs[@]}" 2>&1); then
  echo "$out"; exit 1
fi
# Their lines interleave (each package's output comes whole).
go test -race -count=1 -timeout 20m "${race_pkgs[@]}" &
race_pid=$!
plain_status=0
go test -count=1 -timeout 20m "${plain_pkgs[@]}" || plain_status=$?
race_status=0
wait "$race_pid" || race_status=$?
if ((plain_status || race_status)); then exit 1; fi
for m in "${modules[@]:1}"; do
  (cd "$m" && go test -count=1 -timeout 20m ./...)
done
# A count, not a duration: with -fuzztime as a duration, Go's fuzzing
# coordinator can fail a target with "context deadline exceeded" when the
# time runs out while a worker is busy on a loaded machine (golang/go#75804).
for spec in ./proxy/wire:FuzzInputFramer ./proxy/wire:FuzzFramerWholeCommands ./proxy/wire:FuzzParseCommands \
    ./proxy:FuzzDispatch ./proxy:FuzzClassify ./proxy/quorum:FuzzParseSet ./proxy/quorum:FuzzParseAcquire \
    ./proxy/lockscripts:FuzzNormalizeScript; do
  pkg=${spec%%:*} target=${spec#*:}
  if ! out=$(go test -run '^$' -fuzz "^${target}\$" -fuzztime 30000x "$pkg" 2>&1); then
    echo "$out"; exit 1
  fi
  echo "fuzz $target: 30000 inputs, no failure"
done
