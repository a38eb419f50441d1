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

# Side-by-side smoke: every bench workload (P1-P7) at tiny sizes against exactq and Apache
# Kafka 4.4 (jars via Maven on first use); fails if a workload breaks, never on speed.
[ "${EXACTQ_SKIP_BENCH_SMOKE:-0}" = 1 ] || go run ./bench/cmd/exactq-bench -build -kafka -fsync always,never -smoke suite

if [ -x crashtest/fuzz-smoke.sh ]; then
  FUZZTIME="${FUZZTIME:-5s}" crashtest/fuzz-smoke.sh
fi
echo "test.sh: all tests passed"
