#!/usr/bin/env bash
# permitd's benchmark: one command on a fresh Debian 12 machine (as root).
#
#   tests/bench/run.sh
#
# Installs what is missing (tests/bench/install-deps.sh), builds a release
# permitd in build/bench, starts its own Redis and MariaDB in a temporary
# directory (the policies live in MariaDB, and permitd runs as it would in
# production: migrated store, sync loading them into Redis), then measures on
# loopback, every run bounded in time, the same wrk settings for every HTTP
# contestant:
#   permitd Acquire, binary and JSON, 1 hot bucket and 100,000 keys;
#   permitd Acquire, binary, 100,000 keys, for each algorithm of issue 20
#     (fixed_window, sliding_window, sliding_log, concurrency), in the same
#     rounds as the token bucket's;
#   permitd AcquireBatch of 100 (decisions/s), when this build serves it;
#   the ceiling: redis-benchmark EVALSHA of permitd's own script (exactly the
#     call permitd makes, captured with MONITOR), same key spread;
#   a naive HMGET+HSET+PEXPIRE script (naive.lua) through redis-benchmark;
#   the peer: tests/bench/peer (Node.js, rate-limiter-flexible), 1 and 2
#     processes;
#   the HTTP ceiling: Debian's nginx answering `return 200` to the same
#     requests (issue 41), in the hot bucket's rounds, one worker per CPU;
#   memory: permitd RSS under load, Redis bytes per bucket key;
#   Redis's instructions per decision and bytes per key, every algorithm,
#     counted under valgrind (tests/bench/redis-cost.sh), and the naive
#     script's.
# Prints one markdown table and writes it, with the machine's description
# and the exact commands, to tests/bench/RESULTS.md. See tests/bench/README.md.
#
# Knobs (environment): BENCH_DURATION (s per measured run, 5),
# BENCH_ROUNDS (2: each case runs this many times, the best round counts),
# BENCH_WARMUP (s, 2), BENCH_CONNECTIONS (50), BENCH_WRK_THREADS (1),
# BENCH_THREADS ("1 2 4 8": permitd --threads values tried, for the table
# only; BENCH_SELECT_DURATION s each, 4), BENCH_PERMITD_THREADS (the
# --threads of the measured runs: permitd's default, one per CPU), BENCH_PROFILE (1, the default:
# when perf is installed, also perf-record permitd under load and list the
# top functions; 0: skip), BENCH_COST (1, the default: also count Redis's
# instructions per decision with tests/bench/redis-cost.sh; 0: skip),
# BENCH_KEEP (1: keep the temporary directory and
# its logs), BENCH_RESULTS (where to write the results, tests/bench/RESULTS.md),
# BENCH_KEYS (the bucket keys, 100000), BENCH_PERMITD (a permitd binary to
# measure instead of building build/bench's: the suite's smoke run, ctest -L
# bench, uses its own build).
#
# A run that fails part-way still writes RESULTS (BENCH_RESULTS), marked
# INCOMPLETE, naming the part that failed, with every figure measured
# before it; a redis-cost.sh that fails leaves its section out, says so, and
# the run exits non-zero after writing the rest.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
DURATION=${BENCH_DURATION:-5}
ROUNDS=${BENCH_ROUNDS:-2}
WARMUP=${BENCH_WARMUP:-2}
SELECT_DURATION=${BENCH_SELECT_DURATION:-4}
DENY_DURATION=${BENCH_DENY_DURATION:-5}
CONNS=${BENCH_CONNECTIONS:-50}
WRK_THREADS=${BENCH_WRK_THREADS:-1}
THREAD_CHOICES=${BENCH_THREADS:-"1 2 4 8"}
USED_THREADS=${BENCH_PERMITD_THREADS:-$(nproc)}
PROFILE=${BENCH_PROFILE:-1}
COST=${BENCH_COST:-1}
RESULTS=${BENCH_RESULTS:-$here/RESULTS.md}
NKEYS=${BENCH_KEYS:-100000}
BATCH=100
PREFIX=b:
APP=bench
API=/permit.v1.RateLimitService

t_start=$(date +%s)
load_start=$(cut -d' ' -f1-3 /proc/loadavg)
log() { echo "bench: $*" >&2; }
die() { echo "bench: $*" >&2; exit 1; }
part="set-up"           # what runs now: an incomplete RESULTS names it
written=0               # RESULTS written in full
declare -A R            # R[<case>.<metric>]

# ---------------------------------------------------------------- set-up
"$here/install-deps.sh"

if [ -n "${BENCH_PERMITD:-}" ]; then
    permitd=$BENCH_PERMITD
else
    log "building a release permitd in build/bench"
    cmake -S "$root" -B "$root/build/bench" -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF \
        >/dev/null
    cmake --build "$root/build/bench" -j"$(nproc)" --target permitd >/dev/null
    permitd="$root/build/bench/server/permitd"
fi
[ -x "$permitd" ] || die "no $permitd after the build"

if [ ! -f "$here/peer/node_modules/.package-lock.json" ] ||
        [ "$here/peer/package-lock.json" -nt "$here/peer/node_modules/.package-lock.json" ]; then
    log "installing the peer's packages (npm ci)"
    (cd "$here/peer" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
fi

tmp=$(mktemp -d /tmp/permitd-bench-XXXXXX)
permitd_pid="" sampler_pid="" monitor_pid=""

# The figures measured so far, for a run that failed part-way: RESULTS
# marked INCOMPLETE, naming the part.
write_incomplete() {
    local rc=$1 k
    {
        echo "# permitd benchmark results: INCOMPLETE"
        echo
        echo "Written by \`tests/bench/run.sh\` on $(date -u '+%Y-%m-%d %H:%M UTC'): the run failed"
        echo "in **$part** (exit status $rc) after $(( $(date +%s) - t_start )) s. What it measured before"
        echo "that, as measured (R[case.metric]; see run.sh for what each is):"
        echo
        echo "| case.metric | value |"
        echo "|---|---|"
        for k in $(printf '%s\n' "${!R[@]}" | sort); do
            printf '| %s | %s |\n' "$k" "$(printf '%s' "${R[$k]}" | tr '|\n' '/ ')"
        done
        echo
        echo "- load average (1, 5, 15 min) at the start: $load_start, at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
    } > "$RESULTS"
    echo "bench: INCOMPLETE (failed in $part): what was measured is in $RESULTS" >&2
}

cleanup() {
    local rc=$?
    set +e
    [ "$rc" -ne 0 ] && [ "$written" = 0 ] && write_incomplete "$rc"
    for p in $sampler_pid $monitor_pid; do kill "$p" 2>/dev/null; done
    if [ -n "$permitd_pid" ]; then kill "$permitd_pid" 2>/dev/null; wait "$permitd_pid" 2>/dev/null; fi
    declare -F stop_peer >/dev/null && stop_peer
    if [ -n "${nginx_pid:-}" ]; then kill "$nginx_pid" 2>/dev/null; wait "$nginx_pid" 2>/dev/null; fi
    "$root/tests/stack/redis.sh" stop "$tmp/redis" >/dev/null 2>&1
    "$root/tests/stack/mariadb.sh" stop "$tmp/mariadb" >/dev/null 2>&1
    if [ "$rc" -ne 0 ]; then
        for f in "$tmp"/permitd.*.log "$tmp"/peer.*.log "$tmp"/perf.log; do
            [ -f "$f" ] && { echo "--- $f (tail)" >&2; tail -n 15 "$f" >&2; }
        done
    fi
    if [ "${BENCH_KEEP:-0}" = 1 ] || [ "$rc" -ne 0 ]; then
        echo "bench: logs kept in $tmp" >&2
    else
        rm -rf "$tmp"
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

. "$root/tests/stack/free-port.sh"   # free_port: below the ephemeral range

"$root/tests/stack/redis.sh" start "$tmp/redis" > "$tmp/redis.env"
rport=$(sed -n 's/^PERMITD_TEST_REDIS_PORT=//p' "$tmp/redis.env")
redis_pid=$(cat "$tmp/redis/redis.pid")
rcli() { redis-cli -p "$rport" "$@"; }
log "redis on port $rport (pid $redis_pid)"

# The policy store: a migrated MariaDB of its own. permitd's sync loads the
# policies into Redis (docs/redis.md, "Redis layout"), where the peer and the
# redis-benchmark ceiling read them too.
"$root/tests/stack/mariadb.sh" start "$tmp/mariadb" > "$tmp/mariadb.env"
mysql_url=$(sed -n 's/^PERMITD_TEST_MYSQL_URL=//p' "$tmp/mariadb.env")
mysql_sock=$(sed -n 's/^PERMITD_TEST_MYSQL_SOCKET=//p' "$tmp/mariadb.env")
sql() { mariadb --no-defaults --protocol=socket --socket="$mysql_sock" -uroot permitd -e "$1"; }
PERMITD_MYSQL_URL=$mysql_url "$permitd" migrate up > "$tmp/migrate.log" 2>&1 ||
    die "permitd migrate up failed (see $tmp/migrate.log)"
log "mariadb migrated ($mysql_url)"

# The policies:
#   hot   one shared bucket that (practically) never runs dry: mostly allows
#   deny  one shared bucket of 10, 1 more per second: denies almost all
#   keys  per-key buckets (user-000000..user-099999), a burst no run uses up
#         and a slow refill, so every key stays live for the whole run
# and one policy per other algorithm (issue 20), keyed the same way, with
# limits no run reaches, so that every Acquire is allowed and writes:
#   fixed    fixed_window, 1,000,000 a window of 1h
#   sliding  sliding_window, 1,000,000 a window of 1h
#   log      sliding_log, 1,000 a window of 1h (the log keeps every take of
#            the window: its keys grow through the run; RESULTS.md says by
#            how much)
#   conc     concurrency, 1,000,000 leases of 1h, never released (each key
#            gathers the leases of the run, as the log its entries)
POLICIES=(hot deny keys fixed sliding log conc)
ALGORITHMS=(fixed sliding log conc)
declare -A ALG_NAME=([fixed]=fixed_window [sliding]=sliding_window [log]=sliding_log
                     [conc]=concurrency)
# policy NAME MAX_PERMITS RATE [ALGORITHM WINDOW_MS LEASE_MS]: "NULL" for
# what the algorithm does not take
policy() {
    sql "INSERT INTO policies (name, max_permits, rate, algorithm, window_ms, lease_ms,
                               created_by, updated_by)
             VALUES ('$1', $2, $3, '${4:-token_bucket}', ${5:-NULL}, ${6:-NULL}, 'bench', 'bench');
         INSERT INTO policy_apps (policy_id, app)
             SELECT id, app FROM policies, (SELECT 'web' AS app UNION SELECT '$APP') a
             WHERE name = '$1';"
}
policy hot 1000000000 1000000000
policy deny 10 1
policy keys 1000000 0.01
policy fixed 1000000 NULL fixed_window 3600000
policy sliding 1000000 NULL sliding_window 3600000
policy log 1000 NULL sliding_log 3600000
policy conc 1000000 NULL concurrency NULL 3600000

# ------------------------------------------------------ measuring helpers
CLK_TCK=$(getconf CLK_TCK)
commands=()             # every measuring command, for RESULTS.md

# CPU ticks (utime + stime) of the given pids, summed.
cpu_ticks() {
    local s=0 p t
    for p in "$@"; do
        t=$(sed 's/^.*) //' "/proc/$p/stat" 2>/dev/null | awk '{print $12 + $13}') || t=0
        s=$(( s + ${t:-0} ))
    done
    echo "$s"
}

# CPU ticks in the kernel (stime) of the given pids, summed.
sys_ticks() {
    local s=0 p t
    for p in "$@"; do
        t=$(sed 's/^.*) //' "/proc/$p/stat" 2>/dev/null | awk '{print $13}') || t=0
        s=$(( s + ${t:-0} ))
    done
    echo "$s"
}

# Context switches (voluntary + involuntary) of every thread of the pids.
ctx_switches() {
    local p
    for p in "$@"; do
        cat /proc/"$p"/task/*/status 2>/dev/null
    done | awk '/^(voluntary|nonvoluntary)_ctxt_switches/ {s += $2} END {print s + 0}'
}

children_of() {
    cat "/proc/$1/task/$1/children" 2>/dev/null ||
        awk -v p="$1" '$4 == p {print $1}' /proc/[0-9]*/stat 2>/dev/null
}

# Samples the summed VmRSS (kB) of the pids every 0.2 s; the peak lands in $1.
start_sampler() {
    local out=$1; shift
    echo 0 > "$out"
    (
        max=0
        while :; do
            s=0
            for p in "$@"; do
                r=$(awk '/^VmRSS/ {print $2}' "/proc/$p/status" 2>/dev/null)
                s=$(( s + ${r:-0} ))
            done
            if [ "$s" -gt "$max" ]; then max=$s; echo "$max" > "$out"; fi
            sleep 0.2
        done
    ) &
    sampler_pid=$!
}
stop_sampler() {
    [ -n "$sampler_pid" ] && { kill "$sampler_pid" 2>/dev/null; wait "$sampler_pid" 2>/dev/null || true; }
    sampler_pid=""
}

# One field of INFO commandstats: cmdstat_value evalsha usec_per_call
cmdstat() {
    rcli INFO commandstats | tr -d '\r' | sed -n "s/^cmdstat_$1:/,/p" |
        sed -n "s/.*,$2=\([0-9.]*\).*/\1/p" | sed -n 1p
}

# Writes the script made per decision (SET/PSETEX/HSET/PEXPIRE/... from
# inside it), from commandstats: ~1 when every decision allowed, ~0 when all
# denied. writes_per_decision DECISIONS
writes_per_decision() {
    local w
    w=$(rcli INFO commandstats | tr -d '\r' |
        sed -n 's/^cmdstat_\(set\|psetex\|setex\|hset\|hmset\|pexpire\|expire\|pexpireat\|incrby\):calls=\([0-9]*\).*/\2/p' |
        awk '{s += $1} END {print s + 0}')
    awk -v d="${1:-0}" -v w="$w" 'BEGIN {printf "%.2f", (d > 0 ? w / d : 0)}'
}

# Redis time per decision: evalsha's usec (INFO commandstats) over the run
# ÷ DECISIONS, and decisions per evalsha call, into R[CASE.evalsha_us] and
# R[CASE.per_call]. permitd sends the Acquires of one policy that reach a
# worker together as one call, so usec_per_call alone says little.
# redis_per_decision CASE DECISIONS
redis_per_decision() {
    local usec calls
    usec=$(cmdstat evalsha usec); calls=$(cmdstat evalsha calls)
    R[$1.evalsha_us]=$(awk -v u="${usec:-0}" -v d="${2:-0}" 'BEGIN {printf "%.2f", (d > 0 ? u / d : 0)}')
    R[$1.per_call]=$(awk -v c="${calls:-0}" -v d="${2:-0}" 'BEGIN {printf "%.1f", (c > 0 ? d / c : 0)}')
    R[$1.writes]=$(writes_per_decision "$2")
}

# run_wrk CASE URL PIDS -- ENV...: a warm-up, then the measured run.
# Fills R[CASE.rps|p50|p99|p999|req|non2xx|sockerr|cpu_us|rcpu_us|rss_kb|
# evalsha_us|writes].
run_wrk() {
    local id=$1 url=$2 pids=$3 dur=${RUN_DURATION:-$DURATION}; shift 4
    local line c0 c1 r0 r1 x0 x1 s0 s1 l0=0
    local watch=""
    [ "$pids" = "$permitd_pid" ] && watch=${server_log:-}
    [ -n "$watch" ] && l0=$(wc -l < "$watch")
    env "$@" wrk -t"$WRK_THREADS" -c"$CONNS" -d"${WARMUP}s" -s "$here/acquire.lua" "$url" \
        > "$tmp/$id.warmup.log" 2>&1 || true
    rcli CONFIG RESETSTAT >/dev/null
    # shellcheck disable=SC2086
    start_sampler "$tmp/$id.rss" $pids
    # shellcheck disable=SC2086
    c0=$(cpu_ticks $pids); r0=$(cpu_ticks "$redis_pid"); x0=$(ctx_switches $pids)
    # shellcheck disable=SC2086
    s0=$(sys_ticks $pids)
    env "$@" wrk -t"$WRK_THREADS" -c"$CONNS" -d"${dur}s" -s "$here/acquire.lua" "$url" \
        > "$tmp/$id.log" 2>&1 || true
    # shellcheck disable=SC2086
    # shellcheck disable=SC2086
    c1=$(cpu_ticks $pids); r1=$(cpu_ticks "$redis_pid"); x1=$(ctx_switches $pids)
    # shellcheck disable=SC2086
    s1=$(sys_ticks $pids)
    stop_sampler
    if [ -n "$watch" ]; then   # what permitd had to say during the run
        R[$id.logn]=$(( $(wc -l < "$watch") - l0 ))
        R[$id.log1]=$(tail -n +"$(( l0 + 1 ))" "$watch" | sed -n '1s/^.*msg=//p' | cut -c1-140)
    fi
    commands+=("$* wrk -t$WRK_THREADS -c$CONNS -d${dur}s -s tests/bench/acquire.lua $url")
    line=$(grep '^BENCH ' "$tmp/$id.log" || true)
    if [ -z "$line" ]; then
        log "$id: wrk printed no result:"; cat "$tmp/$id.log" >&2
        R[$id.rps]=0; R[$id.req]=0
        return
    fi
    for kv in $line; do
        case $kv in
        rps=*) R[$id.rps]=${kv#rps=} ;;
        p50_us=*) R[$id.p50]=${kv#p50_us=} ;;
        p99_us=*) R[$id.p99]=${kv#p99_us=} ;;
        p999_us=*) R[$id.p999]=${kv#p999_us=} ;;
        requests=*) R[$id.req]=${kv#requests=} ;;
        non2xx=*) R[$id.non2xx]=${kv#non2xx=} ;;
        sockerr=*) R[$id.sockerr]=${kv#sockerr=} ;;
        secs=*) R[$id.secs]=${kv#secs=} ;;
        esac
    done
    for kv in $(grep '^BATCH ' "$tmp/$id.log" || true); do
        case $kv in
        items_ok=*) R[$id.items_ok]=${kv#items_ok=} ;;
        items_err=*) R[$id.items_err]=${kv#items_err=} ;;
        items_allowed=*) R[$id.items_allowed]=${kv#items_allowed=} ;;
        first_err=*) R[$id.first_err]=${kv#first_err=} ;;
        esac
    done
    R[$id.cpu_us]=$(awk -v t=$(( c1 - c0 )) -v hz="$CLK_TCK" -v n="${R[$id.req]}" \
        'BEGIN {printf "%.1f", (n > 0 ? t * 1e6 / hz / n : 0)}')
    R[$id.rcpu_us]=$(awk -v t=$(( r1 - r0 )) -v hz="$CLK_TCK" -v n="${R[$id.req]}" \
        'BEGIN {printf "%.1f", (n > 0 ? t * 1e6 / hz / n : 0)}')
    R[$id.sys_pct]=$(awk -v s=$(( s1 - s0 )) -v t=$(( c1 - c0 )) \
        'BEGIN {printf "%.0f", (t > 0 ? 100 * s / t : 0)}')
    R[$id.ctx]=$(awk -v x=$(( x1 - x0 )) -v n="${R[$id.req]}" \
        'BEGIN {printf "%.1f", (n > 0 ? x / n : 0)}')
    R[$id.rss_kb]=$(cat "$tmp/$id.rss")
    R[$id.evalsha_calls]=$(cmdstat evalsha calls)
    # decisions: an AcquireBatch's items, else one per request
    redis_per_decision "$id" $(( ${R[$id.items_ok]:-${R[$id.req]}} + ${R[$id.items_err]:-0} ))
    log "$(printf '%-22s %9.0f req/s  p50 %6s us  p99 %6s us  p99.9 %6s us  non-2xx %s' \
        "$id" "${R[$id.rps]}" "${R[$id.p50]}" "${R[$id.p99]}" "${R[$id.p999]}" "${R[$id.non2xx]}")"
}

# run_rb CASE -- COMMAND...: redis-benchmark, -c CONNS -P 1, keys spread by
# __rand_int__ over NKEYS; a short first run warms up and sizes -n for
# about DURATION seconds.
run_rb() {
    local id=$1 n rps r0 r1 csv; shift 2
    csv=$(redis-benchmark -p "$rport" -c "$CONNS" -P 1 -r "$NKEYS" -n 20000 --csv "$@" | tail -1)
    rps=$(echo "$csv" | awk -F'"' '{print $4}')
    n=$(awk -v r="${rps:-10000}" -v d="$DURATION" 'BEGIN {n = int(r * d); if (n < 50000) n = 50000; if (n > 5000000) n = 5000000; print n}')
    rcli CONFIG RESETSTAT >/dev/null
    r0=$(cpu_ticks "$redis_pid")
    csv=$(redis-benchmark -p "$rport" -c "$CONNS" -P 1 -r "$NKEYS" -n "$n" --csv "$@" | tail -1)
    r1=$(cpu_ticks "$redis_pid")
    commands+=("redis-benchmark -p PORT -c $CONNS -P 1 -r $NKEYS -n $n --csv $*")
    # "test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms","max_latency_ms"
    R[$id.rps]=$(echo "$csv" | awk -F'"' '{print $4}')
    R[$id.p50]=$(echo "$csv" | awk -F'"' '{printf "%d", $10 * 1000}')
    R[$id.p99]=$(echo "$csv" | awk -F'"' '{printf "%d", $14 * 1000}')
    R[$id.req]=$n
    R[$id.rcpu_us]=$(awk -v t=$(( r1 - r0 )) -v hz="$CLK_TCK" -v n="$n" \
        'BEGIN {printf "%.1f", t * 1e6 / hz / n}')
    redis_per_decision "$id" "$n"
    log "$(printf '%-22s %9.0f calls/s p50 %6s us  p99 %6s us  (%s calls)' \
        "$id" "${R[$id.rps]}" "${R[$id.p50]}" "${R[$id.p99]}" "$n")"
}

# True once sync has put every policy into Redis.
policies_synced() {
    local p
    for p in "${POLICIES[@]}"; do
        [ "$(rcli EXISTS "$PREFIX{$p}:policy")" = 1 ] || return 1
    done
}

api_port="" admin_port=""
start_permitd() {   # start_permitd THREADS; a few ports tried
    local attempt
    server_log="$tmp/permitd.$1.log"
    for attempt in 1 2 3 4 5; do
        api_port=$(free_port); admin_port=$(free_port)
        while [ "$admin_port" = "$api_port" ]; do admin_port=$(free_port); done
        "$permitd" --listen "127.0.0.1:$api_port" --admin-listen "127.0.0.1:$admin_port" \
            --redis-url "redis://127.0.0.1:$rport" --redis-prefix "$PREFIX" \
            --mysql-url "$mysql_url" --app-auth off --threads "$1" --log-level warn >> "$server_log" 2>&1 &
        permitd_pid=$!
        for _ in $(seq 1 100); do
            curl -sf "http://127.0.0.1:$api_port/healthz" >/dev/null 2>&1 && policies_synced &&
                return 0
            kill -0 "$permitd_pid" 2>/dev/null || break
            sleep 0.1
        done
        kill "$permitd_pid" 2>/dev/null || true
        wait "$permitd_pid" 2>/dev/null || true
        permitd_pid=""
        log "permitd --threads $1 did not come up on port $api_port (attempt $attempt)"
    done
    die "permitd --threads $1 did not come up (see $server_log)"
}
stop_permitd() {
    [ -n "$permitd_pid" ] || return 0
    kill "$permitd_pid" 2>/dev/null || true
    wait "$permitd_pid" 2>/dev/null || true
    permitd_pid="" server_log=""
}

declare -A PEER_PID PEER_PORT
start_peer() {   # start_peer PROCESSES; a few ports tried
    local attempt up port pid
    for attempt in 1 2 3 4 5; do
        port=$(free_port) up=""
        PORT=$port REDIS_HOST=127.0.0.1 REDIS_PORT=$rport POLICY_PREFIX=$PREFIX \
            PEER_PREFIX="peer$1:" WORKERS=$1 node "$here/peer/server.js" >> "$tmp/peer.$1.log" 2>&1 &
        pid=$!
        PEER_PID[$1]=$pid PEER_PORT[$1]=$port
        for _ in $(seq 1 100); do
            curl -sf "http://127.0.0.1:$port/healthz" >/dev/null 2>&1 && { up=1; break; }
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        [ -n "$up" ] && break
        stop_peer "$1"
        log "the peer did not come up on port $port (attempt $attempt)"
    done
    [ -n "$up" ] || die "the peer did not start (see $tmp/peer.$1.log)"
    if [ "$1" -gt 1 ]; then     # every worker listening
        for _ in $(seq 1 100); do
            [ "$(children_of "$pid" | wc -w)" -ge "$1" ] && break
            sleep 0.1
        done
        sleep 0.5
    fi
}
stop_peer() {    # stop_peer [PROCESSES]: that one, or every peer
    local n kids pid
    for n in ${1:-${!PEER_PID[@]}}; do
        pid=${PEER_PID[$n]:-}
        [ -n "$pid" ] || continue
        kids=$(children_of "$pid")
        kill "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
        for k in $kids; do kill "$k" 2>/dev/null || true; done
        unset "PEER_PID[$n]"
    done
}

# The exact EVALSHA permitd sends for one Acquire, captured with MONITOR, as
# a bash array literal with every argument on its own line. The Acquire is
# sent again (up to 10 times) until it is answered with a decision: on a
# loaded machine a Redis streaming MONITOR to a client may not answer
# within permitd's --redis-timeout-ms (50 ms), and that Acquire answers
# unavailable (a loaded suite run's smoke bench failed so).
acquire_allowed() {   # acquire_allowed JSON-BODY OUTFILE: 0 once an Acquire is allowed
    local _
    for _ in 1 2 3 4 5 6 7 8 9 10; do
        curl -s -H 'Content-Type: application/json' -d "$1" \
            "http://127.0.0.1:$api_port$API/Acquire" > "$2"
        grep -Eq '"allowed": ?true' "$2" && return 0
        sleep 0.2
    done
    return 1
}
capture_call() {   # capture_call OUTFILE JSON-BODY MATCH
    local out=$1 body=$2 match=$3
    redis-cli -p "$rport" MONITOR > "$out.monitor" 2>/dev/null &
    monitor_pid=$!
    sleep 0.3
    acquire_allowed "$body" "$tmp/capture.reply" || true
    sleep 0.3
    kill "$monitor_pid" 2>/dev/null; wait "$monitor_pid" 2>/dev/null || true
    monitor_pid=""
    grep -a '"EVALSHA"' "$out.monitor" | grep -aF "$match" | sed -n '1s/^[^]]*\] //p' |
        awk '{ s = substr($0, 2, length($0) - 2); n = split(s, a, /" "/);
               for (i = 2; i <= n; i++) print a[i] }' > "$out"
    [ -s "$out" ] || die "no EVALSHA seen from permitd (reply: $(cat "$tmp/capture.reply"))"
}

fmt_ms() { awk -v u="${1:-}" 'BEGIN {if (u == "") print "–"; else printf "%.2f", u / 1000}'; }
fmt_int() { awk -v x="${1:-}" 'BEGIN {if (x == "") print "–"; else printf "%d", x + 0.5}'; }
ratio() { awk -v a="${1:-0}" -v b="${2:-0}" 'BEGIN {if (b > 0 && a > 0) printf "%.2f", a / b; else print "–"}'; }

# --------------------------------------------------- what permitd sends
part="capturing permitd's script call"
log "permitd: capturing its script call"
start_permitd 2
acquire_allowed "{\"bucket\":\"hot\",\"app\":\"$APP\",\"permits\":1}" "$tmp/hot.reply" ||
    die "a JSON Acquire on the hot bucket answered: $(cat "$tmp/hot.reply")"
capture_call "$tmp/call.keys" "{\"bucket\":\"keys\",\"app\":\"$APP\",\"key\":\"user-000000\",\"permits\":1}" \
    "\"$PREFIX{keys:user-000000}:k\""
capture_call "$tmp/call.hot" "{\"bucket\":\"hot\",\"app\":\"$APP\",\"permits\":1}" "\"$PREFIX{hot}:"
mapfile -t call_keys < "$tmp/call.keys"
mapfile -t call_hot < "$tmp/call.hot"
permitd_sha=${call_keys[0]}
# the script as the build embeds it: its lua/lib/ pieces spliced in
cmake -DSCRIPT="$root/lua/bucket.lua" -DOUT="$tmp/bucket.lua" -P "$root/cmake/lua_splice.cmake" \
    >/dev/null || die "cmake/lua_splice.cmake failed on lua/bucket.lua"
disk_sha=$(rcli -x SCRIPT LOAD < "$tmp/bucket.lua")
if [ "$disk_sha" = "$permitd_sha" ]; then
    sha_note="lua/bucket.lua (SHA $disk_sha) is the script permitd runs"
else
    sha_note="lua/bucket.lua on disk (SHA $disk_sha) differs from the script built into permitd (SHA $permitd_sha): changed since the build; the ceiling runs permitd's"
    log "$sha_note"
fi
log "permitd calls: EVALSHA ${call_keys[*]}"
bench_keys=("EVALSHA" "${call_keys[@]}")
bench_hot=("EVALSHA" "${call_hot[@]}")
for i in "${!bench_keys[@]}"; do
    bench_keys[$i]=${bench_keys[$i]//user-000000/user-__rand_int__}
done

# ----------------------------------------------- Redis memory per bucket key
part="Redis memory per bucket key"
log "memory: filling $NKEYS bucket keys"
rcli DEL "$PREFIX{keys:user-000000}:k" >/dev/null
# Bucket keys only: the fill also makes the bucket index's sets (issue 22,
# lua/bucket.lua's top), whose memory is the buckets' share.
nbuckets() { rcli EVAL "return #redis.call('KEYS', ARGV[1])" 0 "$PREFIX{keys:user-*}:k"; }
db0=$(nbuckets)
mem0=$(rcli INFO memory | tr -d '\r' | sed -n 's/^used_memory://p')
FILL_ARGS=$(printf '%s\n' EVALSHA "${call_keys[@]}") awk -v n="$NKEYS" 'BEGIN {
    na = split(ENVIRON["FILL_ARGS"], a, "\n"); if (a[na] == "") na--
    for (i = 0; i < n; i++) {
        k = sprintf("user-%06d", i)
        printf "*%d\r\n", na
        for (j = 1; j <= na; j++) { v = a[j]; gsub(/user-000000/, k, v); printf "$%d\r\n%s\r\n", length(v), v }
    }
}' > "$tmp/fill.resp"
rcli --pipe < "$tmp/fill.resp" > "$tmp/fill.log" 2>&1 || die "filling failed: $(tail -3 "$tmp/fill.log")"
mem1=$(rcli INFO memory | tr -d '\r' | sed -n 's/^used_memory://p')
db1=$(nbuckets)
R[mem.new_keys]=$(( db1 - db0 ))
R[mem.per_key]=$(awk -v a="$mem0" -v b="$mem1" -v n="$(( db1 - db0 ))" 'BEGIN {printf "%.0f", (n > 0 ? (b - a) / n : 0)}')
R[mem.usage]=$(rcli MEMORY USAGE "$PREFIX{keys:user-000001}:k")
# The state is three little-endian doubles (lua/bucket.lua): shown decoded.
R[mem.value]=$(rcli --raw GET "$PREFIX{keys:user-000001}:k" 2>/dev/null | head -c 24 |
    od -A n -t f8 -w24 | awk '{printf "tokens %s, t %s us, version stamp %s", $1, $2, $3}')
R[mem.type]=$(rcli TYPE "$PREFIX{keys:user-000001}:k")
log "memory: $(( db1 - db0 )) bucket keys, $(( mem1 - mem0 )) bytes, ${R[mem.per_key]} bytes/key (the bucket index's share included); MEMORY USAGE of one: ${R[mem.usage]}"
commands+=("redis-cli --pipe < (EVALSHA ${call_keys[*]} for user-000000..user-099999)")

# ----------------------------------------------------- permitd --threads
part="permitd --threads"
url_acquire() { echo "http://127.0.0.1:$api_port$API/Acquire"; }
declare -A T
# Every value is tried for the table; the measured runs use the default
# (one event loop per CPU), what a user gets, not the luckiest trial.
for t in $THREAD_CHOICES; do
    stop_permitd
    start_permitd "$t"
    RUN_DURATION=$SELECT_DURATION run_wrk "threads$t" "$(url_acquire)" "$permitd_pid" -- \
        BENCH_CODEC=proto BENCH_BUCKET=keys BENCH_KEYS=$NKEYS
    T[$t]="${R[threads$t.rps]} ${R[threads$t.p99]}"
done
log "measured runs: --threads $USED_THREADS"
stop_permitd
start_permitd "$USED_THREADS"

# ------------------------------------------------------------ measured
part="the measured runs"
# Contestants of one case run back to back (permitd binary and JSON, the
# peer with 1 and 2 processes, the redis-benchmark ceiling), so that other
# work on the machine moves them alike and their ratios hold. Idle servers
# wait on their sockets and cost nothing meanwhile.
start_peer 1
start_peer 2
url=$(url_acquire)
peer_url() { echo "http://127.0.0.1:${PEER_PORT[$1]}/acquire"; }
peer_pids() { echo "${PEER_PID[$1]} $(children_of "${PEER_PID[$1]}" | tr '\n' ' ')"; }
for w in 1 2; do
    R[peer$w.sample]=$(curl -s -H 'Content-Type: application/json' \
        -d "{\"bucket\":\"keys\",\"app\":\"$APP\",\"key\":\"user-000042\",\"permits\":1}" \
        "$(peer_url $w)")
done
naive_sha=$(rcli -x SCRIPT LOAD < "$here/naive.lua")

# The HTTP ceiling (issue 41): nginx answering `return 200` with an empty
# body to the very requests permitd gets (acquire.lua's, same wrk
# settings), one worker per CPU as permitd runs a thread per CPU: what an
# HTTP server on this machine does with no decision to make.
nginx_pid="" nginx_url=""
nginx_bin=$(command -v nginx || echo /usr/sbin/nginx)
if [ -x "$nginx_bin" ]; then
    nginx_port=$(free_port)
    mkdir -p "$tmp/nginx"
    cat > "$tmp/nginx/nginx.conf" <<CONF
worker_processes auto;
pid $tmp/nginx/nginx.pid;
error_log $tmp/nginx/error.log warn;
events { worker_connections 1024; }
http {
    access_log off;
    client_body_temp_path $tmp/nginx/body;
    proxy_temp_path $tmp/nginx/proxy;
    fastcgi_temp_path $tmp/nginx/fastcgi;
    uwsgi_temp_path $tmp/nginx/uwsgi;
    scgi_temp_path $tmp/nginx/scgi;
    keepalive_requests 1000000;
    server {
        listen 127.0.0.1:$nginx_port;
        location / { return 200; }
    }
}
CONF
    "$nginx_bin" -p "$tmp/nginx" -c "$tmp/nginx/nginx.conf" -e "$tmp/nginx/error.log" \
        -g 'daemon off;' > "$tmp/nginx/out.log" 2>&1 &
    nginx_pid=$!
    nginx_url="http://127.0.0.1:$nginx_port$API/Acquire"
    for _ in $(seq 1 50); do
        curl -s -o /dev/null -X POST "$nginx_url" && break
        sleep 0.1
    done
    curl -s -o /dev/null -X POST "$nginx_url" || die "nginx did not start (see $tmp/nginx/error.log)"
    R[nginx.version]=$("$nginx_bin" -v 2>&1 | sed 's/^nginx version: //')
else
    log "nginx not installed: no HTTP ceiling (scripts/install-deps.sh bench installs it)"
fi
nginx_pids() { echo "$nginx_pid $(children_of "$nginx_pid" | tr '\n' ' ')"; }

# Each case runs ROUNDS times, and each contestant keeps its best round:
# interference from other work on the machine only ever slows a run down.
# Every round's req/s is listed in RESULTS.md.
keep_best() {   # keep_best ID: R[ID.*] := R[ID@<best round>.*]
    local id=$1 r best="" best_rps=-1 k all=""
    for r in $(seq 1 "$ROUNDS"); do
        all="$all${all:+ / }$(fmt_int "${R[$id@$r.rps]:-0}")"
        if awk -v a="${R[$id@$r.rps]:-0}" -v b="$best_rps" 'BEGIN {exit !(a > b)}'; then
            best=$r best_rps=${R[$id@$r.rps]:-0}
        fi
    done
    for k in "${!R[@]}"; do
        case $k in "$id@$best".*) R[$id.${k#"$id@$best".}]=${R[$k]} ;; esac
    done
    R[$id.rounds]=$all
    rounds_ids+=("$id")
}
rounds_ids=()

for r in $(seq 1 "$ROUNDS"); do
    log "hot bucket, round $r/$ROUNDS: permitd, the peer, the ceiling"
    run_wrk "bin_hot@$r" "$url" "$permitd_pid" -- BENCH_CODEC=proto BENCH_BUCKET=hot BENCH_KEYS=0
    run_wrk "json_hot@$r" "$url" "$permitd_pid" -- BENCH_CODEC=json BENCH_BUCKET=hot BENCH_KEYS=0
    for w in 1 2; do
        run_wrk "peer${w}_hot@$r" "$(peer_url $w)" "$(peer_pids $w)" -- \
            BENCH_CODEC=json BENCH_BUCKET=hot BENCH_KEYS=0
    done
    run_rb "rb_hot@$r" -- "${bench_hot[@]}"
    [ -n "$nginx_pid" ] && run_wrk "nginx_hot@$r" "$nginx_url" "$(nginx_pids)" -- \
        BENCH_CODEC=proto BENCH_BUCKET=hot BENCH_KEYS=0
done
for id in bin_hot json_hot peer1_hot peer2_hot rb_hot; do keep_best "$id"; done
[ -n "$nginx_pid" ] && keep_best nginx_hot

RUN_DURATION=$DENY_DURATION run_wrk bin_deny "$url" "$permitd_pid" -- \
    BENCH_CODEC=proto BENCH_BUCKET=deny BENCH_KEYS=0
R[deny.sample]=$(node "$here/probe.js" acquire "$url" deny "$APP" || true)

# Every algorithm answers an Acquire of its policy with allowed before it is
# measured (a run of denials or errors would measure something else). Asked
# up to 10 times, as acquire_allowed() asks: on a loaded machine one call may
# pass --redis-timeout-ms (50 ms here) and answer unavailable.
for a in "${ALGORITHMS[@]}"; do
    for try in 1 2 3 4 5 6 7 8 9 10; do
        R[alg_$a.sample]=$(node "$here/probe.js" acquire "$url" "$a" "$APP" user-000042) || true
        case ${R[alg_$a.sample]} in
            *allowed=true*) break ;;
        esac
        [ "$try" -eq 10 ] &&
            die "an Acquire on policy $a (${ALG_NAME[$a]}) answered, 10 times: ${R[alg_$a.sample]}"
        sleep 0.2
    done
done

# acquires POLICY RESULT: permitd_acquires_total{policy,result} (/metrics)
acquires() {
    curl -s "http://127.0.0.1:$admin_port/metrics" |
        awk -v m="permitd_acquires_total{policy=\"$1\",result=\"$2\"}" \
            '$1 == m {v = $2} END {print v + 0}'
}

for r in $(seq 1 "$ROUNDS"); do
    log "100k keys, round $r/$ROUNDS: permitd (every algorithm), the peer, the ceiling, the naive script"
    run_wrk "bin_keys@$r" "$url" "$permitd_pid" -- BENCH_CODEC=proto BENCH_BUCKET=keys BENCH_KEYS=$NKEYS
    # the other algorithms right after the token bucket, the same way
    for a in "${ALGORITHMS[@]}"; do
        al0=$(acquires "$a" allowed); de0=$(acquires "$a" denied)
        run_wrk "alg_$a@$r" "$url" "$permitd_pid" -- BENCH_CODEC=proto BENCH_BUCKET="$a" \
            BENCH_KEYS=$NKEYS
        al1=$(acquires "$a" allowed); de1=$(acquires "$a" denied)
        R[alg_$a@$r.allowed]=$(awk -v a=$(( al1 - al0 )) -v d=$(( de1 - de0 )) \
            'BEGIN {printf "%.1f%%", (a + d > 0 ? 100 * a / (a + d) : 0)}')
    done
    run_wrk "json_keys@$r" "$url" "$permitd_pid" -- BENCH_CODEC=json BENCH_BUCKET=keys BENCH_KEYS=$NKEYS
    for w in 1 2; do
        run_wrk "peer${w}_keys@$r" "$(peer_url $w)" "$(peer_pids $w)" -- \
            BENCH_CODEC=json BENCH_BUCKET=keys BENCH_KEYS=$NKEYS
    done
    run_rb "rb_keys@$r" -- "${bench_keys[@]}"
    run_rb "rb_naive@$r" -- EVALSHA "$naive_sha" 1 "naive:{keys}:user-__rand_int__" 1000000 0.01 1
done
for id in bin_keys json_keys peer1_keys peer2_keys rb_keys rb_naive; do keep_best "$id"; done
for a in "${ALGORITHMS[@]}"; do keep_best "alg_$a"; done
stop_peer

# What the log's and the leases' keys held at the end: their state grows
# with every take of the run (a window and a lease of 1h).
# zset_mean NAME LETTER: the mean members of 1,000 of the policy's keys
# (user-000000, user-000100, ...), the version stamp "v" not counted
zset_mean() {
    local i keys=()
    for i in $(seq 0 100 $(( NKEYS - 1 ))); do
        keys+=("$(printf '%s{%s:user-%06d}:%s' "$PREFIX" "$1" "$i" "$2")")
    done
    rcli EVAL "local s, n = 0, 0
        for _, k in ipairs(ARGV) do
          local c = redis.call('ZCARD', k)
          if c > 0 then s = s + c - 1; n = n + 1 end
        end
        return string.format('%.1f (%d of %d keys sampled live)', n > 0 and s / n or 0, n, #ARGV)" \
        0 "${keys[@]}"
}
R[alg_log.held]="entries a key at the end: $(zset_mean log l)"
R[alg_conc.held]="leases a key at the end: $(zset_mean conc c)"

batch_url="http://127.0.0.1:$api_port$API/AcquireBatch"
batch_probe=$(node "$here/probe.js" batch "$batch_url" keys "$APP" "$NKEYS" "$BATCH") && batch_rc=0 || batch_rc=$?
log "AcquireBatch probe: $batch_probe"
R[batch.probe]=$batch_probe
if [ "$batch_rc" -eq 0 ]; then
    run_wrk batch "$batch_url" "$permitd_pid" -- BENCH_CODEC=proto BENCH_BUCKET=keys \
        BENCH_KEYS=$NKEYS BENCH_BATCH=$BATCH
    # decisions/s: items answered with a decision (not an error) per second
    R[batch.decisions]=$(awk -v n="${R[batch.items_ok]:-0}" -v t="${R[batch.secs]:-0}" \
        'BEGIN {printf "%.0f", (t > 0 ? n / t : 0)}')
    log "batch items: ${R[batch.items_ok]:-?} decided (${R[batch.items_allowed]:-?} allowed), ${R[batch.items_err]:-?} errors (first: ${R[batch.first_err]:-})"
elif [ "$batch_rc" -eq 3 ]; then
    R[batch.state]="AcquireBatch: not implemented in this build"
    log "${R[batch.state]}"
else
    R[batch.state]="AcquireBatch: failed ($batch_probe)"
    log "${R[batch.state]}"
fi
R[permitd.hwm_kb]=$(awk '/^VmHWM/ {print $2}' "/proc/$permitd_pid/status")

profile_top=""
if [ "$PROFILE" = 1 ] && command -v perf >/dev/null 2>&1; then
    log "profiling permitd under load (perf record, ${DURATION}s, binary, 100k keys)"
    BENCH_CODEC=proto BENCH_BUCKET=keys BENCH_KEYS=$NKEYS \
        wrk -t"$WRK_THREADS" -c"$CONNS" -d"$(( DURATION + 2 ))s" -s "$here/acquire.lua" "$url" \
        > "$tmp/profile.wrk.log" 2>&1 &
    wrk_pid=$!
    sleep 1
    perf record -e cpu-clock -F 999 -p "$permitd_pid" -o "$tmp/perf.data" -- sleep "$DURATION" \
        > "$tmp/perf.log" 2>&1 || true
    wait "$wrk_pid" || true
    perf report -i "$tmp/perf.data" --no-children --sort symbol,dso --stdio 2>/dev/null |
        grep -v '^#' | grep -v '^$' | sed 's/[[:space:]]*$//' > "$tmp/perf.txt" || true
    profile_top=$(
        echo "all (kernel [k] and user space [.]):"
        head -12 "$tmp/perf.txt"
        echo
        echo "user space only:"
        grep -F '[.]' "$tmp/perf.txt" | sed -n 1,12p
    )
    commands+=("perf record -e cpu-clock -F 999 -p PERMITD_PID -- sleep $DURATION; perf report --no-children --sort symbol,dso")
fi
stop_permitd

# Redis's instructions per decision (callgrind): the one figure here that
# other work on the machine does not move.
cost_table="" cost_failed=""
if [ "$COST" = 1 ]; then
    part="tests/bench/redis-cost.sh"
    log "counting Redis's instructions per decision (tests/bench/redis-cost.sh, under valgrind)"
    if ! cost_table=$("$here/redis-cost.sh" "$root/lua/bucket.lua" 2> >(tee "$tmp/redis-cost.log" >&2)); then
        cost_failed=$(grep '^redis-cost: ' "$tmp/redis-cost.log" | grep -v '^redis-cost: \[' | tail -1)
        cost_failed=${cost_failed:-"tests/bench/redis-cost.sh failed (see its log)"}
        cost_table=""
        log "INCOMPLETE: $cost_failed; the rest is written"
    fi
    commands+=("tests/bench/redis-cost.sh lua/bucket.lua")
fi
part="the peer"

# ---------------------------------------------------------- the peer
peer_best=1
awk -v a="${R[peer2_keys.rps]}" -v b="${R[peer1_keys.rps]}" 'BEGIN {exit !(a > b)}' && peer_best=2
for c in hot keys; do
    for m in rps p50 p99 p999 req non2xx sockerr cpu_us sys_pct ctx rcpu_us rss_kb evalsha_us writes; do
        R[peer_$c.$m]=${R[peer${peer_best}_$c.$m]:-}
    done
done
peer_label="1 process"
[ "$peer_best" = 2 ] && peer_label="2 processes (cluster)"

# ------------------------------------------------------------- the table
t_end=$(date +%s)
elapsed=$(( t_end - t_start ))

row() {   # row LABEL CASE DECISIONS-PER-REQUEST NOTE
    local id=$2 dec
    dec=${R[$id.decisions]:-$(awk -v r="${R[$id.rps]:-0}" -v b="$3" 'BEGIN {printf "%.0f", r * b}')}
    local err=""
    [ "${R[$id.non2xx]:-0}" != 0 ] && err=" **${R[$id.non2xx]} non-2xx**"
    [ "${R[$id.sockerr]:-0}" != 0 ] && err="$err **${R[$id.sockerr]} socket errors**"
    [ "${R[$id.logn]:-0}" != 0 ] && err="$err; permitd logged ${R[$id.logn]} lines, first: \`${R[$id.log1]}\`"
    printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$1" \
        "$(fmt_int "${R[$id.rps]:-}")" "$(fmt_int "$dec")" \
        "$(fmt_ms "${R[$id.p50]:-}")" "$(fmt_ms "${R[$id.p99]:-}")" "$(fmt_ms "${R[$id.p999]:-}")" \
        "${R[$id.cpu_us]:-–}${R[$id.sys_pct]:+ (${R[$id.sys_pct]}% sys)}" "${R[$id.ctx]:-–}" "${R[$id.rcpu_us]:-–}" "${R[$id.evalsha_us]:-–}" "$4$err"
}

mb() { awk -v k="${1:-0}" 'BEGIN {printf "%.1f", k / 1024}'; }
mark() { awk -v v="$1" -v t="$2" -v op="$3" 'BEGIN {
    if (v == "" || v == "–") { print "–"; exit }
    ok = (op == "le") ? (v + 0 <= t + 0) : (v + 0 >= t + 0); print ok ? "met" : "**not met**" }'; }

keys_vs_peer=$(ratio "${R[bin_keys.rps]}" "${R[peer_keys.rps]}")
keys_vs_naive=$(ratio "${R[bin_keys.rps]}" "${R[rb_naive.rps]}")
batch_dec=${R[batch.decisions]:-}

table=$(
cat <<EOF
| run | req/s | decisions/s | p50 ms | p99 ms | p99.9 ms | server CPU µs/req | server ctx switches/req | Redis CPU µs/req | Redis µs/decision (evalsha) | notes |
|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|
EOF
row "permitd Acquire binary, hot bucket" bin_hot 1 "$(ratio "${R[bin_hot.rps]}" "${R[rb_hot.rps]}")× ceiling; $( [ -n "${R[nginx_hot.rps]:-}" ] && echo "$(ratio "${R[bin_hot.rps]}" "${R[nginx_hot.rps]}")× nginx; " )${R[bin_hot.per_call]} decisions/call; writes/decision ${R[bin_hot.writes]}"
row "permitd Acquire binary, hot bucket, deny-heavy (${DENY_DURATION}s)" bin_deny 1 "${R[bin_deny.per_call]} decisions/call; writes/decision ${R[bin_deny.writes]} (denied calls write nothing)"
row "permitd Acquire binary, 100k keys" bin_keys 1 "$(ratio "${R[bin_keys.rps]}" "${R[rb_keys.rps]}")× ceiling; ${keys_vs_peer}× peer; ${keys_vs_naive}× naive ceiling; ${R[bin_keys.per_call]} decisions/call; RSS peak $(mb "${R[bin_keys.rss_kb]}") MB"
row "permitd Acquire JSON, hot bucket" json_hot 1 "$(ratio "${R[json_hot.rps]}" "${R[rb_hot.rps]}")× ceiling; $(ratio "${R[json_hot.rps]}" "${R[peer_hot.rps]}")× peer; ${R[json_hot.per_call]} decisions/call"
row "permitd Acquire JSON, 100k keys" json_keys 1 "$(ratio "${R[json_keys.rps]}" "${R[rb_keys.rps]}")× ceiling; $(ratio "${R[json_keys.rps]}" "${R[peer_keys.rps]}")× peer; ${R[json_keys.per_call]} decisions/call"
if [ -n "$batch_dec" ]; then
    row "permitd AcquireBatch ×$BATCH binary, 100k keys" batch $BATCH \
        "per decision: server CPU $(awk -v x="${R[batch.cpu_us]}" -v b=$BATCH 'BEGIN {printf "%.1f", x / b}') µs, Redis CPU $(awk -v x="${R[batch.rcpu_us]}" -v b=$BATCH 'BEGIN {printf "%.1f", x / b}') µs; evalsha calls/req $(awk -v c="${R[batch.evalsha_calls]:-0}" -v n="${R[batch.req]:-0}" 'BEGIN {printf "%.1f", (n > 0 ? c / n : 0)}'); items: ${R[batch.items_ok]:-?} decided, ${R[batch.items_allowed]:-?} allowed, ${R[batch.items_err]:-?} errors$( [ "${R[batch.items_err]:-0}" != 0 ] && echo " (first: ${R[batch.first_err]:-?})" )"
else
    echo "| ${R[batch.state]} | – | – | – | – | – | – | – | – | – | |"
fi
row "peer (Node, $peer_label) JSON, hot bucket" peer_hot 1 "RSS peak $(mb "${R[peer_hot.rss_kb]}") MB"
row "peer (Node, $peer_label) JSON, 100k keys" peer_keys 1 "RSS peak $(mb "${R[peer_keys.rss_kb]}") MB"
row "ceiling: redis-benchmark EVALSHA permitd's script, hot bucket" rb_hot 1 "one decision per call; writes/decision ${R[rb_hot.writes]}"
row "ceiling: redis-benchmark EVALSHA permitd's script, 100k keys" rb_keys 1 "one decision per call; writes/decision ${R[rb_keys.writes]}"
row "naive script (naive.lua) via redis-benchmark, 100k keys" rb_naive 1 ""
if [ -n "${R[nginx_hot.rps]:-}" ]; then
    row "ceiling: nginx \`return 200\` (${R[nginx.version]}, one worker per CPU), the hot bucket's requests" nginx_hot 0 "no decision: HTTP alone; permitd's binary hot bucket $(ratio "${R[bin_hot.rps]}" "${R[nginx_hot.rps]}")×, 100k keys $(ratio "${R[bin_keys.rps]}" "${R[nginx_hot.rps]}")×"
else
    echo "| ceiling: nginx \`return 200\` | – | – | – | – | – | – | – | – | – | nginx not installed |"
fi
)

targets=$(
cat <<EOF
| measure (binary Acquire, 100k keys, $CONNS connections unless said) | measured | target | |
|---|---:|---:|---|
| Redis time per decision (evalsha usec ÷ decisions; ${R[bin_keys.per_call]} per call) | ${R[bin_keys.evalsha_us]:-–} µs | ≤ 8 µs | $(mark "${R[bin_keys.evalsha_us]:-}" 8 le) |
| req/s ÷ the peer's (JSON, best of 1/2 processes) | ${keys_vs_peer}× | ≥ 2.5× | $(mark "$keys_vs_peer" 2.5 ge) |
| req/s ÷ naive script's redis-benchmark ceiling | ${keys_vs_naive}× | > 1× | $(mark "$keys_vs_naive" 1.0001 ge) |
| req/s ÷ permitd's own script's redis-benchmark ceiling | $(ratio "${R[bin_keys.rps]}" "${R[rb_keys.rps]}")× | close to 1× | |
| p99 | $(fmt_ms "${R[bin_keys.p99]:-}") ms | ≤ 2 ms | $(mark "$(fmt_ms "${R[bin_keys.p99]:-}")" 2 le) |
| permitd CPU per request | ${R[bin_keys.cpu_us]:-–} µs | ≤ 15 µs | $(mark "${R[bin_keys.cpu_us]:-}" 15 le) |
| AcquireBatch ×$BATCH decisions/s | $( [ -n "$batch_dec" ] && fmt_int "$batch_dec" || echo "not served") | ≥ 150,000 | $(mark "$batch_dec" 150000 ge) |
| permitd RSS, peak while under load (VmHWM over the whole run) | $(mb "${R[bin_keys.rss_kb]}") MB ($(mb "${R[permitd.hwm_kb]}") MB) | ≤ 64 MB | $(mark "$(mb "${R[permitd.hwm_kb]}")" 64 le) |
| Redis bytes per active bucket key (used_memory delta / ${R[mem.new_keys]} keys) | ${R[mem.per_key]} B | ≤ 120 B | $(mark "${R[mem.per_key]}" 120 le) |
| MEMORY USAGE of one bucket key (\`${PREFIX}{keys:user-000001}:k\`, ${R[mem.type]}) | ${R[mem.usage]} B | | |
EOF
)

threads_table=$(
echo "| --threads | req/s (binary, 100k keys, ${SELECT_DURATION}s) | p99 ms |"
echo "|---:|---:|---:|"
for t in $THREAD_CHOICES; do
    set -- ${T[$t]}
    printf '| %s%s | %s | %s |\n' "$t" "$([ "$t" = "$USED_THREADS" ] && echo ' (default, used)')" \
        "$(fmt_int "$1")" "$(fmt_ms "$2")"
done
)

alg_row() {   # alg_row CASE LABEL
    local id=$1
    printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$2" \
        "$(fmt_int "${R[$id.rps]:-}")" "$(ratio "${R[$id.rps]:-}" "${R[bin_keys.rps]:-}")" \
        "$(fmt_ms "${R[$id.p99]:-}")" "${R[$id.cpu_us]:-–}" "${R[$id.rcpu_us]:-–}" \
        "${R[$id.evalsha_us]:-–}" "${R[$id.per_call]:-–}" "${R[$id.allowed]:-–}" \
        "${R[$id.held]:-}$( [ "${R[$id.non2xx]:-0}" != 0 ] && echo " **${R[$id.non2xx]} non-2xx**")"
}
alg_table=$(
echo "| algorithm (policy), binary Acquire, $NKEYS keys | req/s | ÷ token bucket | p99 ms | server CPU µs/req | Redis CPU µs/decision | Redis µs/decision (evalsha) | decisions/call | allowed | notes |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"
R[bin_keys.allowed]="–"
alg_row bin_keys "token_bucket (keys: 1,000,000, 0.01/s; the row above)"
alg_row alg_fixed "fixed_window (fixed: 1,000,000 a window of 1h)"
alg_row alg_sliding "sliding_window (sliding: 1,000,000 a window of 1h)"
alg_row alg_log "sliding_log (log: 1,000 a window of 1h)"
alg_row alg_conc "concurrency (conc: 1,000,000 leases of 1h)"
)

peer_table=$(
echo "| peer processes | hot bucket req/s | 100k keys req/s | 100k keys p99 ms | CPU µs/req (100k keys, all processes) |"
echo "|---:|---:|---:|---:|---:|"
for w in 1 2; do
    printf '| %s%s | %s | %s | %s | %s |\n' "$w" "$([ "$w" = "$peer_best" ] && echo ' (used above)')" \
        "$(fmt_int "${R[peer${w}_hot.rps]}")" "$(fmt_int "${R[peer${w}_keys.rps]}")" \
        "$(fmt_ms "${R[peer${w}_keys.p99]}")" "${R[peer${w}_keys.cpu_us]}"
done
)

echo
echo "$table"
echo
echo "$targets"
echo
echo "$alg_table"
echo
echo "$threads_table"
echo
echo "$peer_table"
echo
[ -n "$profile_top" ] && { echo "perf, permitd under load (self time):"; echo "$profile_top"; echo; }

# ----------------------------------------------------------- RESULTS.md
cpu_model=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | sed -n 1p)
mem_total=$(awk '/^MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo)
git_rev=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo "?")
git_dirty=$(git -C "$root" status --porcelain 2>/dev/null | grep -vc '^??' || true)
part="RESULTS.md"
{
    if [ -n "$cost_failed" ]; then
        echo "# permitd benchmark results: INCOMPLETE"
        echo
        echo "**tests/bench/redis-cost.sh failed**: $cost_failed. Its section (Redis"
        echo "instructions per decision and bytes per key) is missing; the rest was measured."
    else
        echo "# permitd benchmark results"
    fi
    echo
    echo "Written by \`tests/bench/run.sh\` on $(date -u '+%Y-%m-%d %H:%M UTC') in ${elapsed} s."
    echo "Every number below comes from this one run; compare ratios, not absolutes"
    echo "(wrk, Redis and the server under test share the machine)."
    echo
    echo "## Machine"
    echo
    echo "- CPUs: $(nproc) ($cpu_model)"
    echo "- memory: $mem_total"
    echo "- kernel: $(uname -sr)"
    echo "- load average (1, 5, 15 min) at the start: $load_start, at the end: $(cut -d' ' -f1-3 /proc/loadavg) (other work on the machine shows here)"
    echo "- $(redis-server --version | cut -d' ' -f1-3), MariaDB $(mariadb --no-defaults --version | sed -n 's/.*Distrib \([^ ,-]*\).*/\1/p'), Node $(node --version), $(wrk -v 2>&1 | sed -n 1p | cut -d' ' -f1-2)"
    echo "- permitd: git $git_rev (+$git_dirty modified files), Release build, \`--threads $USED_THREADS\`, \`--redis-prefix $PREFIX\`"
    echo "- wrk: \`-t$WRK_THREADS -c$CONNS -d${DURATION}s\` after a ${WARMUP}s warm-up, keep-alive, loopback; each case run $ROUNDS times with its contestants back to back, the best round of each kept (see Rounds)"
    echo
    echo "## Results"
    echo
    echo "$table"
    echo
    echo "Decisions/s = req/s × items per request (for AcquireBatch: items answered with a decision, not an error, per second). CPU µs/req: (utime+stime) of the"
    echo "process(es) over the run ÷ requests; context switches from every thread's"
    echo "/proc status (voluntary + involuntary). Redis µs/decision: INFO commandstats"
    echo "usec of evalsha (reset before each run) ÷ decisions; permitd sends the Acquires"
    echo "of one policy that reach a worker together as the items of one call (decisions/call"
    echo "in the notes), redis-benchmark one per call. Ceiling rows: redis-benchmark"
    echo "\`-c $CONNS -P 1\`, keys spread with \`-r $NKEYS\` (its keys carry 12 digits:"
    echo "user-000000012345); p99.9 is not reported by redis-benchmark. The deny-heavy"
    echo "run's sample reply: \`${R[deny.sample]}\`. Sample JSON replies, permitd:"
    echo "\`$(cat "$tmp/capture.reply")\`, the peer: \`${R[peer1.sample]}\`."
    echo
    echo "## Every algorithm (issue 20)"
    echo
    echo "Each policy's binary Acquire over the same $NKEYS keys, in the same rounds as the"
    echo "token bucket's 100k-keys run (each right after it, best round kept). Redis CPU"
    echo "µs/decision: redis-server's utime+stime over the run ÷ requests (one decision"
    echo "each). allowed: permitd_acquires_total's allowed ÷ (allowed + denied) over the"
    echo "run (every limit is set out of reach). Sample replies: $(for a in "${ALGORITHMS[@]}"; do printf '%s `%s`; ' "$a" "${R[alg_$a.sample]}"; done)"
    echo
    echo "$alg_table"
    echo
    echo "## Targets (issue 5)"
    echo
    echo "$targets"
    echo
    echo "## Rounds"
    echo
    echo "req/s of every round (each ${DURATION}s; the table above shows the best):"
    echo
    echo "| run | req/s per round |"
    echo "|---|---|"
    for id in "${rounds_ids[@]}"; do echo "| $id | ${R[$id.rounds]} |"; done
    echo
    echo "## permitd --threads"
    echo
    echo "$threads_table"
    echo
    echo "## The peer (Node.js, rate-limiter-flexible $(node -p "require('$here/peer/node_modules/rate-limiter-flexible/package.json').version"), ioredis $(node -p "require('$here/peer/node_modules/ioredis/package.json').version"))"
    echo
    echo "$peer_table"
    echo
    echo "## Redis memory"
    echo
    echo "$NKEYS buckets filled with permitd's own call (one Acquire per key), used_memory"
    echo "before $mem0 B, after $mem1 B, ${R[mem.new_keys]} new keys: ${R[mem.per_key]} B per key"
    echo "(includes the key's share of the main and expires dictionaries and of the bucket index's sets, issue 22). One key:"
    echo "\`${PREFIX}{keys:user-000001}:k\` = 24 bytes (${R[mem.value]}), MEMORY USAGE ${R[mem.usage]} B."
    echo
    if [ -n "$cost_table" ]; then
        echo "## Redis instructions per decision and bytes per key, every algorithm"
        echo
        echo "Counted, not timed (tests/bench/redis-cost.sh: a Redis of its own under"
        echo "valgrind's callgrind, 100,000 states a case (1,000 for the sliding log at"
        echo "max 1,000), the same calls every run; within about 2% from run to run,"
        echo "whatever else the machine does). Memory: used_memory's delta over the"
        echo "case's fill ÷ its keys (Redis's key tables included), MEMORY USAGE of one;"
        echo "a sliding log's grows with its limit (one entry a permit in the window):"
        echo "measured on full keys at max_permits 10 and 1,000:"
        echo
        echo "$cost_table"
        echo
    fi
    echo "## Script"
    echo
    echo "$sha_note. permitd's call, as MONITOR saw it:"
    echo
    echo '```'
    echo "EVALSHA ${call_keys[*]}"
    echo '```'
    if [ -n "$profile_top" ]; then
        echo
        echo "## Profile (perf record -e cpu-clock, permitd, binary Acquire, 100k keys)"
        echo
        echo '```'
        echo "$profile_top"
        echo '```'
    fi
    echo
    echo "## Commands"
    echo
    echo "Policies, in MariaDB (\`permitd migrate up\`, then): \`INSERT INTO policies (name, max_permits, rate, ...) VALUES (NAME, M, R, ...)\`"
    echo "with apps web and $APP, for hot (M 1000000000, R 1000000000), deny (10, 1), keys (1000000, 0.01); with \`algorithm\`, \`window_ms\`, \`lease_ms\` (rate NULL): fixed (fixed_window, 1000000, 3600000), sliding (sliding_window, 1000000, 3600000), log (sliding_log, 1000, 3600000), conc (concurrency, 1000000, lease 3600000); permitd's sync loads them into Redis."
    echo "permitd: \`build/bench/server/permitd --listen 127.0.0.1:PORT --admin-listen 127.0.0.1:PORT --redis-url redis://127.0.0.1:PORT --redis-prefix $PREFIX --mysql-url mysql://permitd:permitd@127.0.0.1:PORT/permitd --threads $USED_THREADS --log-level warn\`."
    echo "Peer: \`PORT=... REDIS_PORT=... POLICY_PREFIX=$PREFIX WORKERS=1|2 node tests/bench/peer/server.js\`."
    echo
    echo '```'
    printf '%s\n' "${commands[@]}" | awk '!seen[$0]++'
    echo '```'
} > "$RESULTS"
written=1

log "wrote $RESULTS"
log "done in ${elapsed} s"
[ -z "$cost_failed" ] || die "INCOMPLETE: $cost_failed"
