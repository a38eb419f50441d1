#!/usr/bin/env bash
# The full test suite: unit, model, integration, interop (franz-go, sarama, kcat, Java),
# crash-safety tests, and a short run of every fuzz target. It installs what the interop
# suites need (kcat from Debian; the Java client comes from Maven Central on first use).
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v kcat >/dev/null 2>&1; then
  echo "test.sh: installing kcat (Debian package) for the interop suite"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq && $SUDO apt-get install -y -qq kcat >/dev/null
fi

go vet ./...
go test -count=1 -timeout 40m ./...

if [ -x crashtest/fuzz-smoke.sh ]; then
  FUZZTIME="${FUZZTIME:-5s}" crashtest/fuzz-smoke.sh
fi
echo "test.sh: all tests passed"
