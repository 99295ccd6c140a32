#!/usr/bin/env bash
# Runs the whole test suite: unit tests and tests against real redis-server
# masters, the real proxy binary and real client libraries.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
export PATH="$PATH:/usr/local/go/bin"
go vet ./...
go test -count=1 -timeout 20m ./...
