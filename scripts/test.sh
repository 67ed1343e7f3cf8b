#!/usr/bin/env bash
# Builds permitd with AddressSanitizer + UBSan and runs every test: unit,
# integration (real Redis) and e2e (a stock Connect client), against
# throw-away servers in a temporary directory that is removed at the end.
#
#   scripts/test.sh                 everything
#   scripts/test.sh -L unit         any ctest arguments narrow the run
#
# Environment: PERMITD_BUILD_DIR (default build/test), PERMITD_JOBS.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=${PERMITD_BUILD_DIR:-$root/build/test}
jobs=${PERMITD_JOBS:-$(nproc)}

"$root/scripts/install-deps.sh" test

stack=$(mktemp -d -t permitd-test.XXXXXX)
cleanup() {
    "$root/tests/stack/stack.sh" down "$stack" >/dev/null 2>&1 || true
    rm -rf "$stack"
}
trap cleanup EXIT

cmake -S "$root" -B "$build" -DPERMITD_SANITIZE=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DPERMITD_STACK_DIR="$stack" >/dev/null
cmake --build "$build" -j "$jobs"

export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

cd "$build"
ctest --output-on-failure --timeout 900 "$@"
