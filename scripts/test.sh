#!/usr/bin/env bash
# Builds permitd with AddressSanitizer + UBSan and runs every test: unit,
# integration (real Redis) and e2e (a stock Connect client), against
# throw-away servers in a temporary directory that is removed at the end.
#
#   scripts/test.sh                 everything
#   scripts/test.sh -L unit         any ctest arguments narrow the run
#
# Then, if that passed, a second build with clang and libFuzzer (tests/fuzz)
# runs every fuzzer for PERMITD_FUZZ_SECONDS (default 20; 0 skips this).
#
# Environment: PERMITD_BUILD_DIR (default build/test), PERMITD_JOBS,
# PERMITD_FUZZ_BUILD_DIR (default build/fuzz), PERMITD_FUZZ_SECONDS.
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
status=0
ctest --output-on-failure --timeout 900 "$@" || status=$?
fuzz_seconds=${PERMITD_FUZZ_SECONDS:-20}
if [ "$status" -ne 0 ] || [ "$fuzz_seconds" = 0 ]; then
    exit "$status"
fi

# The fuzzers: request decoding (Connect framing, proto, JSON) and config
# parsing under libFuzzer + ASan + UBSan, each on a copy of its seed corpus
# (tests/fuzz/corpus), in parallel. A failure leaves the input that did it
# in $fuzz_build/tests/fuzz/artifacts/.
fuzz_build=${PERMITD_FUZZ_BUILD_DIR:-$root/build/fuzz}
CC=clang cmake -S "$root" -B "$fuzz_build" -DPERMITD_FUZZ=ON -DBUILD_TESTING=ON \
      -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPERMITD_FUZZ_SECONDS="$fuzz_seconds" >/dev/null
cmake --build "$fuzz_build" -j "$jobs" --target fuzzers
cd "$fuzz_build"
ctest -L fuzz --output-on-failure -j "$jobs"
