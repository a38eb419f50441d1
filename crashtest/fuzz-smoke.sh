#!/usr/bin/env bash
# fuzz-smoke.sh: run every Go fuzz target of the exactq module for a short time each and
# fail if any of them finds a crasher. Meant for CI (about 10 s per target plus build time).
#
# Usage (from anywhere inside the checkout):
#   crashtest/fuzz-smoke.sh                 # every target, FUZZTIME=10s each
#   FUZZTIME=30s crashtest/fuzz-smoke.sh    # longer smoke
#   FUZZ_MATCH=batch crashtest/fuzz-smoke.sh   # only packages whose import path contains "batch"
#
# Targets are found by scanning the packages' _test.go files for `func FuzzXxx(f *testing.F)`,
# so a new target is picked up without editing this script.
#
# The produce-path targets: batch FuzzParse and FuzzRecords (an input is refused with a
# Kafka code or it validates, and then kmsg and franz-go's consumer read exactly the
# header's count of records; Validate's allocation stays within the decoder's bound),
# batch FuzzRecordWindow (a stream window of a few bytes finds what an in-place walk
# finds), compress FuzzDecompress (streaming equals whole decompression, allocation
# bounded by MemoryBound).
# The SASL targets: internal/security/sasl FuzzScramExchange, FuzzPlainExchange and
# FuzzOAuthExchange (no client token authenticates without the password or a key of the
# key set; every failure is an authentication failure, never a server error), and
# internal/server FuzzSASLListener (no bytes reach the handler of a SASL listener before
# authentication).
#
# When a target fails, `go test` writes the failing input to <package>/testdata/fuzz/<Target>/
# and prints it. Reproduce with `go test -run '^<Target>/<file>$' ./<package>`; commit the
# file with the fix so it stays a regression test (go test runs the testdata corpus always).
#
# A long campaign (one target, all cores, hours; the generated corpus is kept in
# $(go env GOCACHE)/fuzz and reused by later runs):
#   go test -run '^$' -fuzz '^FuzzParse$' -fuzztime 8h -parallel "$(nproc)" ./batch
# Run targets one after another (go test fuzzes one target per invocation), e.g. overnight:
#   FUZZTIME=2h crashtest/fuzz-smoke.sh
# A campaign can be stopped with Ctrl-C at any time without losing the corpus.
set -euo pipefail

FUZZTIME="${FUZZTIME:-10s}"
FUZZ_MATCH="${FUZZ_MATCH:-}"

cd "$(dirname "$0")/.."
test -f go.mod || { echo "fuzz-smoke: go.mod not found in $(pwd)" >&2; exit 2; }

# "importpath dir file..." for every package with test files.
mapfile -t pkgs < <(go list -e -f '{{.ImportPath}} {{.Dir}}{{range .TestGoFiles}} {{.}}{{end}}{{range .XTestGoFiles}} {{.}}{{end}}' ./...)

targets=()
for line in "${pkgs[@]}"; do
	read -r path dir files <<<"$line"
	[ -n "$files" ] || continue
	[ -z "$FUZZ_MATCH" ] || [[ "$path" == *"$FUZZ_MATCH"* ]] || continue
	for f in $files; do
		while read -r name; do
			[ -n "$name" ] && targets+=("$path $name")
		done < <(sed -nE 's/^func (Fuzz[A-Za-z0-9_]*)\([A-Za-z_][A-Za-z0-9_]* \*testing\.F\).*/\1/p' "$dir/$f")
	done
done

if [ "${#targets[@]}" -eq 0 ]; then
	echo "fuzz-smoke: no fuzz targets found" >&2
	exit 2
fi

# Go 1.26's fuzz coordinator can end a run at the -fuzztime deadline with a bare "context
# deadline exceeded" and a failing exit, without any crasher (go.dev/issue/75804, fixed in
# Go 1.27): its check that the deadline is the normal stop races the cancellation of the
# workers' context, and a loaded machine widens the window. A real crasher always writes
# its input under testdata/fuzz/<Target>/, so a run that failed with that message and wrote
# nothing is run again (at most twice more); any other failure, or a new input, fails.
corpus_listing() { # corpus_listing DIR TARGET: the committed and new inputs of TARGET
	ls -1 "$1/testdata/fuzz/$2" 2>/dev/null || true
}

echo "fuzz-smoke: ${#targets[@]} targets, ${FUZZTIME} each"
failed=()
retried=()
out="$(mktemp)"
trap 'rm -f "$out"' EXIT
for t in "${targets[@]}"; do
	read -r path name <<<"$t"
	dir="$(go list -f '{{.Dir}}' "$path")"
	for attempt in 1 2 3; do
		[ "$attempt" -eq 1 ] && echo "=== $name ($path)" || echo "=== $name ($path), attempt $attempt"
		before="$(corpus_listing "$dir" "$name")"
		if go test -run '^$' -fuzz "^${name}\$" -fuzztime "$FUZZTIME" "$path" 2>&1 | tee "$out"; [ "${PIPESTATUS[0]}" -eq 0 ]; then
			break
		fi
		after="$(corpus_listing "$dir" "$name")"
		if [ "$before" = "$after" ] && grep -q '^    context deadline exceeded$' "$out" && [ "$attempt" -lt 3 ]; then
			echo "fuzz-smoke: $name ended with the fuzz coordinator's deadline race (no input written); running it again"
			retried+=("$name")
			continue
		fi
		failed+=("$name ($path)")
		break
	done
done
[ "${#retried[@]}" -eq 0 ] || echo "fuzz-smoke: run again after the coordinator's deadline race: ${retried[*]}"

if [ "${#failed[@]}" -gt 0 ]; then
	echo "fuzz-smoke: FAILED: ${failed[*]}" >&2
	echo "fuzz-smoke: the failing inputs are under <package>/testdata/fuzz/<Target>/" >&2
	exit 1
fi
echo "fuzz-smoke: all ${#targets[@]} targets passed"
