#!/usr/bin/env bash
# Builds permitd with AddressSanitizer + UBSan and runs every test: unit,
# integration (real Redis) and e2e (a stock Connect client), against
# throw-away servers in a temporary directory that is removed at the end.
#
#   scripts/test.sh                 everything
#   scripts/test.sh -L unit         any ctest arguments narrow the run
#
# ctest runs PERMITD_TEST_JOBS tests at once (default 4: most of a test's
# time is waiting on servers, not CPU); every test has a Redis of its own
# and takes a RESOURCE_LOCK for what it must have alone (tests/CMakeLists.txt).
#
# Then, if that passed, a second build with clang and libFuzzer (tests/fuzz)
# runs every fuzzer for PERMITD_FUZZ_SECONDS (default 20; 0 skips this).
# That build is made while ctest runs (niced: the tests come first), so its
# minutes overlap the tests' waiting. So is the Release build scripts/run.sh
# makes (PERMITD_RELEASE_BUILD_DIR, default build/test-release): the run
# fails if it does not build.
#
# Environment: PERMITD_BUILD_DIR (default build/test), PERMITD_JOBS (build
# jobs), PERMITD_TEST_JOBS, PERMITD_FUZZ_BUILD_DIR (default build/fuzz),
# PERMITD_FUZZ_SECONDS, PERMITD_TEST_BUSY (N > 0: `stress-ng --cpu N` keeps N
# cores busy while the tests and fuzzers run, started and stopped here by its PID: the
# loaded machine CI is; the load average is printed at the start and the
# end).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=${PERMITD_BUILD_DIR:-$root/build/test}
jobs=${PERMITD_JOBS:-$(nproc)}
test_jobs=${PERMITD_TEST_JOBS:-4}
busy=${PERMITD_TEST_BUSY:-0}

"$root/scripts/install-deps.sh" test

stack=$(mktemp -d -t permitd-test.XXXXXX)
busy_pid=""
fuzz_pid=""
release_pid=""
t0=$(date +%s)
cleanup() {
    echo "test.sh: $(( $(date +%s) - t0 )) s in all (build, tests, fuzzers); load average now: $(cut -d' ' -f1-3 /proc/loadavg)"
    [ -n "$busy_pid" ] && { kill "$busy_pid" 2>/dev/null; wait "$busy_pid" 2>/dev/null || true; }
    [ -n "$fuzz_pid" ] && { kill -- "-$fuzz_pid" 2>/dev/null; wait "$fuzz_pid" 2>/dev/null || true; }
    [ -n "$release_pid" ] && { kill -- "-$release_pid" 2>/dev/null; wait "$release_pid" 2>/dev/null || true; }
    "$root/tests/stack/stack.sh" down "$stack" >/dev/null 2>&1 || true
    rm -rf "$stack"
}
trap cleanup EXIT

cmake -S "$root" -B "$build" -DPERMITD_SANITIZE=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DPERMITD_STACK_DIR="$stack" >/dev/null
cmake --build "$build" -j "$jobs"

export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

# The fuzzers' build, in the background while the tests run (a failed
# build fails the run after the tests, with its log).
fuzz_seconds=${PERMITD_FUZZ_SECONDS:-20}
fuzz_build=${PERMITD_FUZZ_BUILD_DIR:-$root/build/fuzz}
fuzz_pid=""
if [ "$fuzz_seconds" != 0 ]; then
    mkdir -p "$fuzz_build"
    # In a process group of its own (setsid), so that an interrupted run
    # stops the whole build, compilers included.
    setsid bash -c 'CC=clang cmake -S "$1" -B "$2" -DPERMITD_FUZZ=ON -DBUILD_TESTING=ON \
            -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPERMITD_FUZZ_SECONDS="$3" >/dev/null &&
        exec nice -n 10 cmake --build "$2" -j "$4" --target fuzzers' _ \
        "$root" "$fuzz_build" "$fuzz_seconds" "$jobs" > "$fuzz_build/build.log" 2>&1 &
    fuzz_pid=$!
fi

# The Release build run.sh makes (plain -O2, no sanitizers): a warning the
# sanitizer build does not see (-Wformat-truncation, say) fails it, and with
# it a newcomer's first run. Built niced while the tests run, checked after.
release_build=${PERMITD_RELEASE_BUILD_DIR:-$root/build/test-release}
mkdir -p "$release_build"
setsid bash -c 'cmake -S "$1" -B "$2" -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF >/dev/null &&
    exec nice -n 10 cmake --build "$2" -j "$3" --target permitd' _ \
    "$root" "$release_build" "$jobs" > "$release_build/build.log" 2>&1 &
release_pid=$!

cd "$build"
if [ "$busy" -gt 0 ]; then
    stress-ng --cpu "$busy" --quiet >/dev/null 2>&1 &
    busy_pid=$!
    echo "test.sh: stress-ng --cpu $busy running (pid $busy_pid)"
fi
echo "test.sh: load average at the start: $(cut -d' ' -f1-3 /proc/loadavg)"
status=0
started=$(date +%s)
ctest --output-on-failure --timeout 900 -j "$test_jobs" "$@" || status=$?
echo "test.sh: ctest took $(( $(date +%s) - started )) s; load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
release_status=0
wait "$release_pid" || release_status=$?
release_pid=""
if [ "$release_status" -ne 0 ]; then
    cat "$release_build/build.log" >&2
    echo "test.sh: the Release build (what scripts/run.sh builds) failed (above)" >&2
    [ "$status" -ne 0 ] || status=$release_status
fi
if [ "$status" -ne 0 ] || [ "$fuzz_seconds" = 0 ]; then
    exit "$status"
fi

# The fuzzers: request decoding (Connect framing, proto, JSON) and config
# parsing under libFuzzer + ASan + UBSan, each on a copy of its seed corpus
# (tests/fuzz/corpus), in parallel. A failure leaves the input that did it
# in $fuzz_build/tests/fuzz/artifacts/.
fuzz_status=0
wait "$fuzz_pid" || fuzz_status=$?
fuzz_pid=""
if [ "$fuzz_status" -ne 0 ]; then
    cat "$fuzz_build/build.log" >&2
    echo "test.sh: the fuzzers' build failed (above)" >&2
    exit "$fuzz_status"
fi
cd "$fuzz_build"
ctest -L fuzz --output-on-failure -j "$jobs"
