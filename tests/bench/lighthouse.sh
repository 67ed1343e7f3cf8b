#!/usr/bin/env bash
# lighthouse.sh - Lighthouse's performance score of the admin UI's policy
# list (issue 40, point 9): tests/e2e/ui/lighthouse.test.mjs run
# BENCH_LIGHTHOUSE_RUNS times (3) with the desktop score asserted at
# BENCH_LIGHTHOUSE_MIN (95) or more, and CLS under 0.1 on both presets
# (BENCH_LIGHTHOUSE_PRESETS: desktop,mobile).
#
#   tests/bench/lighthouse.sh [PERMITD]   PERMITD: the binary to measure
#                                         (default build/bench's release one,
#                                         built here when missing)
#
# The score is a timing (total blocking time weighs 30 % of it), so it is
# a bench, not a suite test: e2e_lighthouse asserts only the layout shift.
# Starts its own Redis and MariaDB in a temporary directory (tests/stack);
# the test starts permitd on them, as the suite does. Installs the UI test's
# npm packages (lighthouse, playwright-core, axe-core) when missing. Writes
# each run's figures and the load average to BENCH_RESULTS
# (tests/bench/RESULTS-lighthouse.md), marked INCOMPLETE, naming the run,
# when one fails. Everything it started is stopped at the end.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
runs=${BENCH_LIGHTHOUSE_RUNS:-3}
min=${BENCH_LIGHTHOUSE_MIN:-95}
results=${BENCH_RESULTS:-$here/RESULTS-lighthouse.md}
ui="$root/tests/e2e/ui"
log() { echo "lighthouse: $*" >&2; }
die() { echo "lighthouse: $*" >&2; exit 1; }

permitd=${1:-${BENCH_PERMITD:-}}
if [ -z "$permitd" ]; then
    log "building a release permitd in build/bench"
    cmake -S "$root" -B "$root/build/bench" -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF >/dev/null
    cmake --build "$root/build/bench" -j"$(nproc)" --target permitd >/dev/null
    permitd="$root/build/bench/server/permitd"
fi
[ -x "$permitd" ] || die "no permitd at $permitd"
permitd=$(realpath "$permitd")      # the test runs in tests/e2e/ui
if [[ ! -d "$ui/node_modules/lighthouse" || "$ui/package-lock.json" -nt "$ui/node_modules/.package-lock.json" ]]; then
    (cd "$ui" && npm ci --no-audit --no-fund >&2)
fi

tmp=$(mktemp -d /tmp/permitd-lighthouse-XXXXXX)
cleanup() {
    local rc=$?
    set +e
    "$root/tests/stack/redis.sh" stop "$tmp/redis" >/dev/null 2>&1
    "$root/tests/stack/mariadb.sh" stop "$tmp/mariadb" >/dev/null 2>&1
    rm -rf "$tmp"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

"$root/tests/stack/redis.sh" start "$tmp/redis" > "$tmp/redis.env"
"$root/tests/stack/mariadb.sh" start "$tmp/mariadb" > "$tmp/mariadb.env"
export PERMITD_BIN=$permitd
export PERMITD_TEST_REDIS_URL=$(sed -n 's/^PERMITD_TEST_REDIS_URL=//p' "$tmp/redis.env")
export PERMITD_TEST_MYSQL_SOCKET=$(sed -n 's/^PERMITD_TEST_MYSQL_SOCKET=//p' "$tmp/mariadb.env")
export PERMITD_UI_SCREENSHOTS="$tmp/shots"
export PERMITD_LIGHTHOUSE_MIN_PERFORMANCE=$min
export PERMITD_LIGHTHOUSE_PRESETS=${BENCH_LIGHTHOUSE_PRESETS:-desktop,mobile}

rows=()
failed=""
for i in $(seq "$runs"); do
    before=$(cut -d' ' -f1 /proc/loadavg)
    if ! (cd "$ui" && node --test --test-reporter=spec lighthouse.test.mjs) > "$tmp/run$i.log" 2>&1; then
        failed="run $i of $runs"
    fi
    grep '^LIGHTHOUSE ' "$tmp/run$i.log" | sed 's/^LIGHTHOUSE //' > "$tmp/run$i.json" || true
    while read -r line; do
        rows+=("$(python3 -c 'import json, sys
m = json.loads(sys.argv[1])
print("| %s | %s | %d | %.4f | %d | %d | %s |" % (sys.argv[2], m["preset"], m["performance"],
      m["cls"], m["lcp"], m["tbt"], sys.argv[3]))' "$line" "$i" "$before")")
    done < "$tmp/run$i.json"
    [ -n "$failed" ] && { grep -E 'AssertionError|Error' "$tmp/run$i.log" | head -n 5 >&2; break; }
done

{
    echo "# Lighthouse: the admin UI's policy list"
    echo
    if [ -n "$failed" ]; then
        echo "**INCOMPLETE**: $failed failed (desktop performance under $min, CLS 0.1 or more, or"
        echo "the run did not finish); the figures below are what was measured."
        echo
    fi
    echo "$(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, permitd $permitd,"
    echo "lighthouse $(node -p "require('$ui/node_modules/lighthouse/package.json').version"),"
    echo "chromium $(/usr/bin/chromium --version 2>/dev/null | awk '{print $2}'); five policies (one of each"
    echo "algorithm, four apps each). Desktop: Lighthouse's desktop preset (1350 x 940,"
    echo "simulated 40 ms RTT and 10 Mbit/s, 1x CPU); mobile: its default (412 x 823,"
    echo "simulated slow 4G, 4x CPU)."
    echo
    echo "| run | preset | performance | CLS | LCP ms | TBT ms | load before |"
    echo "|---|---|---|---|---|---|---|"
    printf '%s\n' "${rows[@]}"
} > "$results"
log "wrote $results"
cat "$results"
[ -z "$failed" ] || die "$failed"
