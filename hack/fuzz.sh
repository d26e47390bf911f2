#!/usr/bin/env bash
# Runs every fuzz target of the module (func FuzzXxx in a _test.go file) for
# FUZZTIME each: a duration ("5s") or a count of executions ("1000000x").
# Prints one line a target with its executions (as the fuzzer last
# reported them), and fails on the first
# target that finds a failing input (kept under testdata/fuzz for go test).
# Go 1.26's fuzz coordinator can report the end of -fuzztime itself as a
# failure ("context deadline exceeded", no input); such a run is repeated,
# up to four runs, and a target that never got a clean run fails
# (deadline_race below).
set -euo pipefail
cd "$(dirname "$0")/.."
GO="${GO:-go}"
FUZZTIME="${FUZZTIME:-5s}"
status=0

# deadline_race: the run failed only because Go's fuzz coordinator (Go
# before 1.27, go.dev/issue/75804) reported the end of -fuzztime as
# "context deadline exceeded" while a worker was busy: no input failed (none
# written under testdata/fuzz), no panic, no test error.
deadline_race() {
	grep -q 'context deadline exceeded' "$1" &&
		! grep -qE 'Failing input written|panic:|_test\.go:[0-9]+:' "$1"
}

# fuzz runs one target; on the coordinator's deadline race it runs it again,
# up to four runs in all, so that only a real finding fails and a target
# that could never be fuzzed fails too (it is not counted as fuzzed).
fuzz() {
	local pkg=$1 name=$2 out=$3 run
	for run in 1 2 3 4; do
		if "$GO" test -run '^$' -fuzz "^${name}\$" -fuzztime "$FUZZTIME" -parallel 2 "$pkg" >"$out" 2>&1; then
			return 0
		fi
		deadline_race "$out" || return 1
		echo "fuzz: $pkg $name: the fuzz coordinator's deadline race (go.dev/issue/75804) in run $run, no failing input" >&2
	done
	echo "fuzz: $pkg $name: not fuzzed: the deadline race in every run" >>"$out"
	return 1
}

while IFS=: read -r file name; do
	pkg="./$(dirname "$file")"
	start=$(date +%s)
	out="$(mktemp)"
	if fuzz "$pkg" "$name" "$out"; then
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
