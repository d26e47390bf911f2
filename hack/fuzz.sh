#!/usr/bin/env bash
# Runs every fuzz target of the module (func FuzzXxx in a _test.go file) for
# FUZZTIME each: a duration ("5s") or a count of executions ("1000000x").
# Prints one line a target with its executions (as the fuzzer last
# reported them), and fails on the first
# target that finds a failing input (kept under testdata/fuzz for go test).
set -euo pipefail
cd "$(dirname "$0")/.."
GO="${GO:-go}"
FUZZTIME="${FUZZTIME:-5s}"
status=0
while IFS=: read -r file name; do
	pkg="./$(dirname "$file")"
	start=$(date +%s)
	out="$(mktemp)"
	if "$GO" test -run '^$' -fuzz "^${name}\$" -fuzztime "$FUZZTIME" -parallel 2 "$pkg" >"$out" 2>&1; then
		# A large cached corpus can take all of a short FUZZTIME to replay
		# (the fuzzer then reports no executions beyond it).
		execs="$(grep -oE 'execs: [0-9]+' "$out" | tail -1 | cut -d' ' -f2 || true)"
		baseline="$(grep -oE 'baseline coverage: [0-9]+/[0-9]+' "$out" | tail -1 | cut -d' ' -f3 || true)"
		echo "fuzz: $pkg $name: ok, ${execs:-0} new executions (cached corpus replayed: ${baseline:-?}) in $(($(date +%s) - start)) s"
	else
		echo "fuzz: $pkg $name: FAILED"
		cat "$out"
		status=1
	fi
	rm -f "$out"
done < <(grep -rlE --include='*_test.go' '^func Fuzz' . | sort | while read -r f; do
	grep -oE '^func Fuzz[A-Za-z0-9_]+' "$f" | sed "s|^func |${f#./}:|"
done)
exit $status
