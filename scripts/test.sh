#!/usr/bin/env bash
# The whole test suite: set-up, build, lit + FileCheck tests (dialect,
# importers; they generate their own small models), C++ unit tests and the
# Python tests. Prints one closing line "N passed, N failed".
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD_DIR=${BUILD_DIR:-build}

bash scripts/setup.sh || exit 1
bash scripts/build.sh || { echo "build failed"; exit 1; }

passed=0; failed=0
count() { # name rc passed failed
  echo "== $1: $3 passed, $4 failed (exit $2)"
  passed=$((passed + $3)); failed=$((failed + $4))
  if [[ $2 -ne 0 && $4 -eq 0 ]]; then failed=$((failed + 1)); fi
}

# lit, slowest tests first: lit orders by the times it recorded in the
# build's last run; a fresh build starts from the times of a fresh-clone CI
# run (test/lit-test-times.txt), so the two workers do not end on one long
# test alone.
if [[ -d "$BUILD_DIR/test" && ! -f "$BUILD_DIR/test/.lit_test_times.txt" ]]; then
  cp test/lit-test-times.txt "$BUILD_DIR/test/.lit_test_times.txt"
fi
lit_out=$(mktemp)
lit -sv "$BUILD_DIR/test" 2>&1 | tee "$lit_out"
rc=${PIPESTATUS[0]}
lp=$(grep -oE '^ *Passed *: *[0-9]+' "$lit_out" | grep -oE '[0-9]+' || echo 0)
lf=$(grep -oE '^ *Failed *: *[0-9]+' "$lit_out" | grep -oE '[0-9]+' || echo 0)
count lit "$rc" "${lp:-0}" "${lf:-0}"

# C++ unit tests
if [[ -d "$BUILD_DIR/unittests" ]]; then
  ct_out=$(mktemp)
  (cd "$BUILD_DIR" && ctest --output-on-failure) 2>&1 | tee "$ct_out"
  rc=${PIPESTATUS[0]}
  tot=$(grep -oE 'tests passed, [0-9]+ tests failed out of [0-9]+' "$ct_out" | grep -oE '[0-9]+' | tail -1 || echo 0)
  cf=$(grep -oE '[0-9]+ tests failed' "$ct_out" | grep -oE '[0-9]+' || echo 0)
  count ctest "$rc" $(( ${tot:-0} - ${cf:-0} )) "${cf:-0}"
fi

# Python
py_out=$(mktemp)
PYTHONPATH="$ROOT/python" VARUNA_BUILD_DIR="$ROOT/$BUILD_DIR" \
  python3 -m pytest -q python/tests 2>&1 | tee "$py_out"
rc=${PIPESTATUS[0]}
pp=$(grep -oE '[0-9]+ passed' "$py_out" | tail -1 | grep -oE '[0-9]+' || echo 0)
pf=$(grep -oE '[0-9]+ failed' "$py_out" | tail -1 | grep -oE '[0-9]+' || echo 0)
count pytest "$rc" "${pp:-0}" "${pf:-0}"

echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]
