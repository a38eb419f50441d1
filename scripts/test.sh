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

# Each phase says how long it took, so CI's log shows where the time goes (the -race
# phase's cost is one of the figures the project tracks).
phase() { echo "test.sh: $1 took $((SECONDS - phase_start)) s"; phase_start=$SECONDS; }
phase_start=$SECONDS

unformatted=$(gofmt -l $(git ls-files '*.go'))
if [ -n "$unformatted" ]; then echo "test.sh: not gofmt-formatted:"; echo "$unformatted"; exit 1; fi
go vet ./...
go test -count=1 -timeout 40m ./...
phase "vet and go test ./..."

# The race detector over the packages that run goroutines of their own (listeners,
# coordinators' marker jobs, share fetch waits, produce validation, clients). Left out: the
# process-based suites (crashtest, compat, bench, hostile). Allocation-bound assertions
# (TestValidateBombs, TestReaderBombs, TestProduceDecompressionFlood, ...) skip themselves
# under -race (alloctest.RaceEnabled: the detector changes what allocates). Measured on a
# shared 2-core machine (load average 5-10 from other work): 2m14s of wall time without
# batch, compress and broker, the longest share/sharepartition (53 s); those three alone
# take 2m21s (broker 94 s), or 79 s (broker 64 s) at load average 1-2.
go test -race -count=1 -timeout 40m ./internal/server ./internal/security/... ./internal/log ./internal/cluster/... ./internal/batch ./internal/compress ./internal/broker ./internal/share/... ./internal/group ./internal/txn ./kgoext/... ./eos ./internal/fetchsession ./sim ./cmd/exactq
phase "go test -race"

# Side-by-side smoke: every bench workload (P1-P7) at tiny sizes against exactq and Apache
# Kafka 4.4 (jars via Maven on first use); fails if a workload breaks, never on speed.
[ "${EXACTQ_SKIP_BENCH_SMOKE:-0}" = 1 ] || go run ./bench/cmd/exactq-bench -build -kafka -fsync always,never -smoke suite
[ "${EXACTQ_SKIP_BENCH_SMOKE:-0}" = 1 ] || phase "bench smoke"

if [ -x crashtest/fuzz-smoke.sh ]; then
  FUZZTIME="${FUZZTIME:-5s}" crashtest/fuzz-smoke.sh
  phase "fuzz smoke"
fi
echo "test.sh: all tests passed"
