#!/usr/bin/env bash
# Redis's work per decision, counted in instructions rather than timed, and
# Redis's memory per active key, for every algorithm (issue 20).
#
#   tests/bench/redis-cost.sh [SCRIPT]     (default: lua/bucket.lua)
#
# usec_per_call moves with whatever else the machine is doing; the number
# of instructions Redis executes for the same calls does not (within about
# 2%: the Redis clock and the allocator's state vary). So a change to a
# script is judged here, the algorithms are compared on the same footing,
# and so is the naive script. SCRIPT replaces lua/bucket.lua in the token
# bucket's rows (to measure another version of it the same way); the other
# algorithms run lua/<algorithm>.lua.
#
# A Redis of its own runs under valgrind's callgrind with counting off. For
# each case below it is filled with one state for each of the case's keys
# (the 100k-keys case of tests/bench/run.sh in its steady state: every
# decision reads a state and writes it back), used_memory and MEMORY USAGE
# measured before and after, then it counts only while it answers a fixed
# list of calls sent with redis-cli --pipe, each in the call layout every
# decision script takes (lua/bucket.lua's header; compact, as permitd
# sends it, unless an item carries a request id or a lease id):
#   one Acquire per call          (what redis-benchmark sends: the ceiling)
#   9 Acquires of one policy       (what a worker sends together under
#                                   run.sh's load: 8-9 decisions per call)
#   an AcquireBatch of 100
# The cases, with limits under which every counted take is allowed and
# writes its state, and no state of the run expires before it ends (the
# token bucket refills at 0.0001/s, not run.sh's 0.01/s, whose full
# bucket, 100 s after a take, has no key: 100,000 keys vanishing in the
# middle of another case's memory figures; the rate costs nothing here):
#   token_bucket     max 1,000,000, rate 0.0001/s; also with a request_id
#                    on every item (its answer kept 10 min, the default)
#   fixed_window     max 1,000,000, window 1d
#   sliding_window   max 1,000,000, window 1d
#   sliding_log      max 10 (100,000 keys) and max 1,000 (1,000 keys: a
#                    full log of 1,000 holds about 119 kB, 100,000 of them
#                    would not fit), window 1d; each key filled half full
#                    (5 / 500 entries), so that the counted takes, a few
#                    per key, are allowed. Memory is measured on keys
#                    filled full (10 / 1,000 entries): a log's memory grows
#                    with its limit, and a full key is what it costs
#   concurrency      max 1,000,000, lease 1h: each key holds one lease, a
#                    take adds one; and Release of the leases the takes
#                    granted (each release names a lease held)
#   naive.lua        one per call (HMGET + HSET + PEXPIRE, for comparison)
# Keys are drawn at random from the case's keys with a fixed seed; before
# counting, one call of each case is decoded and must answer status 0,
# allowed (else the script stops: a call the script refuses measures
# nothing).
#
# Prints two markdown tables on stdout (run.sh puts them in RESULTS.md),
# progress on stderr. Needs valgrind, redis-server, redis-cli. Knobs:
# COST_CALLS (decisions per case, 9000), COST_CASES (the case names to run,
# default all: tb tb_rid fw sw log10 log1000 cc cc_release naive),
# COST_MAX_TB9 (instructions: when set, the run fails, after printing its
# tables, if the token bucket's decision at nine a call costs more; the
# suite's bench_redis_cost holds it at issue 41's 45k), COST_KEYS (the keys
# of a case, 100000; the sliding log at max 1,000 has
# a hundredth of them: the suite's smoke run, ctest -L bench, takes 1000),
# COST_KEEP=1 (keep the temporary directory with the calls sent and
# callgrind's dumps), COST_LAYOUT=19 (the token bucket's calls in the
# layout of before issue 20: no ARGV[3], 2 ARGV an item; with SCRIPT the
# bucket.lua of then, e.g. git show 9459f8f:lua/bucket.lua, to compare it
# on the same calls, keys and limits).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
bucket_script=${1:-$root/lua/bucket.lua}
decisions=${COST_CALLS:-9000}
nkeys=${COST_KEYS:-100000}
cases=${COST_CASES:-"tb tb_rid fw sw log10 log1000 cc cc_release naive"}
log() { echo "redis-cost: [${SECONDS}s] $*" >&2; }
die() { echo "redis-cost: $*" >&2; exit 1; }

[ -r "$bucket_script" ] || die "no script at $bucket_script"
for c in valgrind callgrind_control redis-server redis-cli; do
    command -v "$c" >/dev/null 2>&1 || die "$c is not installed (apt-get install valgrind redis-server)"
done

tmp=$(mktemp -d /tmp/permitd-redis-cost-XXXXXX)
vg_pid=""
cleanup() {
    local rc=$?
    set +e
    if [ -n "$vg_pid" ]; then
        redis-cli -p "$port" SHUTDOWN NOSAVE >/dev/null 2>&1
        wait "$vg_pid" 2>/dev/null
    fi
    if [ "$rc" -ne 0 ]; then
        [ -f "$tmp/valgrind.log" ] && tail -n 20 "$tmp/valgrind.log" >&2
        echo "redis-cost: logs kept in $tmp" >&2
    else
        [ -n "${COST_KEEP:-}" ] || rm -rf "$tmp"
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

. "$root/tests/stack/free-port.sh"   # free_port: below the ephemeral range

# No slow log: under valgrind a call of nine runs past its 10 ms, and Redis
# then copies the call's arguments into the log, work a Redis at full speed
# never does for it (1.9-2.5% of the count at nine a call, varying with the
# machine's speed; issue 41). Started again on another port when another
# server took its port first (valgrind's start takes a second or more).
port="" vg_pid=""
for attempt in 1 2 3 4 5; do
    port=$(free_port) || die "found no free port"
    valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$tmp/callgrind.out" \
        redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
        --dir "$tmp" --protected-mode no --slowlog-log-slower-than -1 > "$tmp/valgrind.log" 2>&1 &
    vg_pid=$!
    for _ in $(seq 1 300); do
        redis-cli -p "$port" PING 2>/dev/null | grep -q PONG && break
        kill -0 "$vg_pid" 2>/dev/null || break
        sleep 0.1
    done
    kill -0 "$vg_pid" 2>/dev/null && break
    wait "$vg_pid" 2>/dev/null || true
    grep -q "Address already in use" "$tmp/valgrind.log" ||
        die "redis-server under valgrind exited (see $tmp/valgrind.log)"
    log "port $port was taken before redis-server bound it (attempt $attempt); another port"
    vg_pid=""
done
[ -n "$vg_pid" ] || die "redis-server under valgrind found no free port in 5 attempts"
redis-cli -p "$port" PING 2>/dev/null | grep -q PONG || die "redis-server under valgrind did not start"
rcli() { redis-cli -p "$port" "$@"; }

# Each script as the build embeds it: its lua/lib/ pieces spliced in by
# cmake/lua_splice.cmake (a script without any comes out as it is).
load() {   # load SCRIPT: its SHA-1, once spliced and loaded
    local out
    out=$tmp/$(basename "$1")
    cmake -DSCRIPT="$1" -DOUT="$out" -P "$root/cmake/lua_splice.cmake" >&2 ||
        die "cmake/lua_splice.cmake failed on $1"
    rcli -x SCRIPT LOAD < "$out"
}
declare -A SHA
for a in fixed_window sliding_window sliding_log concurrency; do
    SHA[$a]=$(load "$root/lua/$a.lua")
done
SHA[token_bucket]=$(load "$bucket_script")
SHA[naive]=$(rcli -x SCRIPT LOAD < "$here/naive.lua")

# A case: its label, the algorithm (its script), the policy's max_permits,
# p1 and p2 (lua/bucket.lua's header: rate and rate history, window_ms and
# calendar, lease_ms), the key's name ("%06d" the key's number; the layout
# of server/stores/policy.c, prefix b:), its number of keys, the permits
# of the fill's one take per key, that of the memory fill (0: the fill
# is the memory's), and what each item carries (rid: a request id, ""
# none).
declare -A C_LABEL C_ALG C_MAX C_P1 C_P2 C_KEY C_NKEYS C_FILL C_MEMFILL C_RID C_MODE
defcase() {   # defcase NAME LABEL ALG MAX P1 P2 KEY NKEYS FILL MEMFILL RID MODE
    C_LABEL[$1]=$2 C_ALG[$1]=$3 C_MAX[$1]=$4 C_P1[$1]=$5 C_P2[$1]=$6 C_KEY[$1]=$7
    C_NKEYS[$1]=$8 C_FILL[$1]=$9 C_MEMFILL[$1]=${10} C_RID[$1]=${11} C_MODE[$1]=${12}
}
defcase tb "token_bucket (max 1,000,000, rate 0.0001/s)" token_bucket 1000000 0.0001 "" \
    'b:{keys:user-%06d}:k' "$nkeys" 1 0 "" take
defcase tb_rid "token_bucket, each take with a request_id" token_bucket 1000000 0.0001 "" \
    'b:{keys:user-%06d}:k' "$nkeys" 0 0 rid take
defcase fw "fixed_window (max 1,000,000, window 1d)" fixed_window 1000000 86400000 "" \
    'b:{fixed:user-%06d}:f' "$nkeys" 1 0 "" take
defcase sw "sliding_window (max 1,000,000, window 1d)" sliding_window 1000000 86400000 "" \
    'b:{sliding:user-%06d}:s' "$nkeys" 1 0 "" take
defcase log10 "sliding_log, max 10 (window 1d, 5 entries a key)" sliding_log 10 86400000 "" \
    'b:{log10:user-%06d}:l' "$nkeys" 5 10 "" take
defcase log1000 "sliding_log, max 1,000 (window 1d, 500 entries a key, 1,000 keys)" sliding_log 1000 \
    86400000 "" 'b:{log1000:user-%06d}:l' $(( nkeys >= 100000 ? nkeys / 100 : 10 )) 500 1000 "" take
defcase cc "concurrency, Acquire (max 1,000,000, lease 1h, 1 lease a key)" concurrency 1000000 \
    3600000 "" 'b:{conc:user-%06d}:c' "$nkeys" 1 0 "" take
defcase cc_release "concurrency, Release (of a lease held)" concurrency 1000000 3600000 "" \
    'b:{conc:user-%06d}:c' "$nkeys" 0 0 "" release
defcase naive "naive.lua (HMGET + HSET + PEXPIRE)" naive 1000000 0.0001 "" \
    'naive:{keys}:user-%06d' "$nkeys" 1 0 "" naive

# calls CASE ITEMS NCALLS SEED [FILL-PERMITS [KEY-FORMAT [LINES]]]: the RESP
# of NCALLS script calls of ITEMS decisions each, on keys of CASE drawn at
# random with SEED; with FILL-PERMITS, every key once, in order, each item
# taking that many (a fill). Lease ids are 32 hex digits numbered by the
# seed and the item, so a release drawn with a take's seed names the
# leases that take granted. LINES=1: the arguments one a line instead.
calls() {
    local c=$1
    awk -v items="$2" -v ncalls="$3" -v seed="$4" -v fill="${5:-0}" -v fmt="${6:-${C_KEY[$1]}}" \
        -v lines="${7:-0}" -v nkeys="${C_NKEYS[$c]}" -v alg="${C_ALG[$c]}" \
        -v sha="${SHA[${C_ALG[$c]}]}" -v mode="${C_MODE[$c]}" -v max="${C_MAX[$c]}" \
        -v p1="${C_P1[$c]}" -v p2="${C_P2[$c]}" -v rid="${C_RID[$c]}" -v layout="${COST_LAYOUT:-}" '
    function bulk(s) { return lines ? s "\n" : "$" length(s) "\r\n" s "\r\n" }
    function head(n) { if (!lines) printf "*%d\r\n", n }
    function key() {
        if (fill) return sprintf(fmt, next_key++)
        return sprintf(fmt, int(rand() * nkeys))
    }
    BEGIN {
        srand(seed)
        for (c = 0; c < ncalls; c++) {
            if (mode == "naive") {
                head(7)
                printf "%s%s%s%s%s%s%s", bulk("EVALSHA"), bulk(sha), bulk("1"),
                    bulk(key()), bulk(max), bulk(p1), bulk(fill ? fill : 1)
                continue
            }
            # the keys, then mode, np 1, the request-id time-to-live (ms),
            # the policy (version stamp, max_permits, p1, p2), then per
            # item: policy 1, permits, request id, lease id; as permitd
            # sends it (server/decisions/limiter.c, call_head()): compact,
            # ARGV[3] "" and per item policy 1, permits, when no item
            # carries a request id or a lease id (every concurrency take and
            # release carries one)
            n = (fill && nkeys - next_key < items) ? nkeys - next_key : items
            wide = (rid != "" || alg == "concurrency")
            old = (layout == 19 && alg == "token_bucket")   # no ARGV[3] (COST_LAYOUT)
            head(10 - old + (wide ? 5 : 3) * n)
            printf "%s%s%s", bulk("EVALSHA"), bulk(sha), bulk(n)
            for (i = 0; i < n; i++)
                printf "%s", bulk(key())
            printf "%s%s%s", bulk(fill ? "take" : mode), bulk("1"), old ? "" : bulk(wide ? "600000" : "")
            printf "%s%s%s%s", bulk("16777217"), bulk(max), bulk(p1), bulk(p2)
            for (i = 0; i < n; i++) {
                printf "%s%s", bulk("1"), bulk(fill ? fill : 1)
                if (!wide)
                    continue
                r = (rid != "") ? sprintf("req-%d-%d", seed, c * items + i) : ""
                l = (alg == "concurrency") ? sprintf("%08x%024x", fill ? 0 : seed, c * items + i) : ""
                printf "%s%s", bulk(r), bulk(l)
            }
        }
    }'
}

# pipe FILE: sends it, fails unless every reply is one without an error
# (however long a loaded machine makes valgrind take: no --pipe-timeout)
pipe() {
    local out
    out=$(rcli --pipe --pipe-timeout 0 < "$1" 2>&1 | tail -n 1) || true
    case $out in
        "errors: 0, replies: "*) ;;
        *) die "redis-cli --pipe < $1: $out" ;;
    esac
}

# check CASE SEED: one call of CASE (not counted) must answer status 0 and
# allowed: a case whose calls the script refuses or denies would measure
# something else than a decision that reads and writes its state.
check() {
    local c=$1 status allowed args
    [ "$c" = naive ] && return 0
    mapfile -t args < <(calls "$c" 1 1 "$2" 0 "${C_KEY[$c]}" 1)
    read -r status allowed < <(rcli --raw "${args[@]}" | head -c 16 | od -A n -t f8 -w16) || true
    [ "${status:-x}" = 0 ] && [ "${allowed:-x}" = 1 ] && return 0
    die "${C_LABEL[$c]}: a sample call answered status ${status:-?}, allowed ${allowed:-?} (want 0 and 1): ${args[*]}"
}

mem() { rcli INFO memory | tr -d '\r' | sed -n 's/^used_memory://p'; }

# fill CASE: an empty Redis (each case's memory its own, the growth of
# Redis's key tables included, as in run.sh's measure), then one take per
# key of the case, counting off: the state its decisions are counted on.
# Redis bytes a key: used_memory's delta over the fill ÷ the keys, and
# MEMORY USAGE (SAMPLES 0: every element) of one; for a case with MEMFILL,
# over a fill of that many permits a key into keys of their own
# (full-NNNNNN), flushed once measured.
declare -A MEM MEMU MEMK MEMN
fill() {
    local c=$1 m0 m1 d fmt measured per=100
    [ "${C_FILL[$c]}" -gt 0 ] || return 0
    [ "${C_ALG[$c]}" = naive ] && per=1     # naive.lua: one key a call
    log "${C_LABEL[$c]}: filling ${C_NKEYS[$c]} keys, counting off"
    rcli FLUSHALL >/dev/null
    calls "$c" "$per" $(( (C_NKEYS[$c] + per - 1) / per )) 1 "${C_FILL[$c]}" > "$tmp/$c.fill.resp"
    fmt=${C_KEY[$c]} measured=$tmp/$c.fill.resp
    if [ "${C_MEMFILL[$c]}" -gt 0 ]; then
        fmt=${fmt/user-/full-} measured=$tmp/$c.memfill.resp
        calls "$c" "$per" $(( (C_NKEYS[$c] + per - 1) / per )) 1 "${C_MEMFILL[$c]}" "$fmt" > "$measured"
    fi
    m0=$(mem)
    pipe "$measured"
    # The case's own keys: a fill also makes the bucket index's sets (issue
    # 22, lua/bucket.lua's top: P{T}ix:NAME, one a slot its keys land in),
    # which are no state of their own; their memory is the states' share.
    m1=$(mem); d=$(rcli EVAL "return #redis.call('KEYS', ARGV[1])" 0 "${fmt//%06d/*}")
    [ "$d" -eq "${C_NKEYS[$c]}" ] || die "${C_LABEL[$c]}: the fill left $d keys, not ${C_NKEYS[$c]}"
    MEM[$c]=$(awk -v a="$m0" -v b="$m1" -v n="$d" 'BEGIN {printf "%.0f", (b - a) / n}')
    # shellcheck disable=SC2059
    MEMK[$c]=$(printf "$fmt" 1)
    MEMU[$c]=$(rcli MEMORY USAGE "${MEMK[$c]}" SAMPLES 0)
    log "${C_LABEL[$c]}: $d keys, ${MEM[$c]} B a key, MEMORY USAGE ${MEMU[$c]} B"
    if [ "$measured" != "$tmp/$c.fill.resp" ]; then
        rcli FLUSHALL >/dev/null
        pipe "$tmp/$c.fill.resp"
    fi
}

# count CASE NAME ITEMS SEED: Redis instructions for $decisions decisions
declare -A IR
dumps=0
count() {
    local c=$1 name=$2 items=$3 dump
    calls "$c" "$items" $(( decisions / items )) "$4" > "$tmp/$name.resp"
    callgrind_control -i on "$vg_pid" >/dev/null
    pipe "$tmp/$name.resp"
    callgrind_control -i off "$vg_pid" >/dev/null
    callgrind_control --dump="$name" "$vg_pid" >/dev/null
    dump=$tmp/callgrind.out.$(( ++dumps ))
    IR[$name]=$(awk '/^totals:/ {print $2; exit}' "$dump")
    [ -n "${IR[$name]}" ] || die "no instruction count in $dump"
    log "$name: ${IR[$name]} instructions, $(( decisions / items )) calls of $items"
}

for c in $cases; do
    [ -n "${C_ALG[$c]:-}" ] || die "COST_CASES: no case \"$c\" (there are: ${!C_ALG[*]})"
    fill "$c"
    check "$c" 999
    d0=$(rcli DBSIZE); m0=$(mem)
    case $c in
    naive) count "$c" "$c.1" 1 2 ;;
    cc_release)   # releases the leases the concurrency Acquires took
        for items in 1 9 100; do
            [ -n "${IR[cc.$items]:-}" ] || die "cc_release needs the case cc before it"
            count "$c" "$c.$items" "$items" $(( 1000 + items ))
        done ;;
    *)  for items in 1 9 100; do count "$c" "$c.$items" "$items" $(( 1000 + items )); done ;;
    esac
    if [ "$c" = tb_rid ]; then   # the records the counted takes left
        d1=$(rcli DBSIZE); m1=$(mem)
        MEM[$c]=$(awk -v a="$m0" -v b="$m1" -v n="$(( d1 - d0 ))" 'BEGIN {printf "%.0f", (n > 0 ? (b - a) / n : 0)}')
        MEMK[$c]=$(rcli --scan --pattern 'b:{keys:user-*}:k?rreq-*' | awk 'NR == 1')
        MEMU[$c]=$(rcli MEMORY USAGE "${MEMK[$c]}" SAMPLES 0)
        MEMN[$c]=$(( d1 - d0 ))
        MEMK[$c]=${MEMK[$c]//$'\x1f'/\\x1f}
    fi
done

per() { awk -v t="$1" -v n="$2" 'BEGIN {printf "%.0f", t / n}'; }
k() { awk -v x="$1" 'BEGIN {printf "%.1fk", x / 1000}'; }
tb1=""
[ -n "${IR[tb.1]:-}" ] && tb1=$(per "${IR[tb.1]}" "$decisions")
echo "| decision (each reads and writes a state) | alone (1 per call) | 9 per call | AcquireBatch ×100 | alone ÷ token bucket's |"
echo "|---|---:|---:|---:|---:|"
for c in $cases; do
    a=$(per "${IR[$c.1]}" "$decisions")
    if [ "$c" = naive ]; then
        nine="–" hundred="–"
    else
        nine=$(k "$(per "${IR[$c.9]}" "$decisions")")
        hundred=$(k "$(per "${IR[$c.100]}" "$decisions")")
    fi
    echo "| ${C_LABEL[$c]} | $(k "$a") | $nine | $hundred | $( [ -n "$tb1" ] && awk -v a="$a" -v b="$tb1" 'BEGIN {printf "%.2f×", a / b}' || echo –) |"
done
echo
echo "| state | keys | Redis bytes a key (used_memory delta ÷ keys, the bucket index's share included) | MEMORY USAGE of one |"
echo "|---|---:|---:|---:|"
for c in $cases; do
    [ -n "${MEM[$c]:-}" ] || continue
    state=${C_LABEL[$c]}
    case $c in
    log10|log1000) state="${C_LABEL[$c]%% (*} (full: ${C_MEMFILL[$c]} entries a key)" ;;
    cc) state="concurrency, 1 lease held a key" ;;
    naive) state="naive.lua, a hash {tokens, ts}" ;;
    esac
    [ "$c" = tb_rid ] && state="a request_id's record (the answer kept for a retry)"
    echo "| $state | ${MEMN[$c]:-${C_NKEYS[$c]}} | ${MEM[$c]} | ${MEMU[$c]} (\`${MEMK[$c]}\`) |"
done

# The ceiling of the token bucket's nine a call (COST_MAX_TB9), judged last:
# the tables above are printed either way.
if [ -n "${COST_MAX_TB9:-}" ]; then
    [ -n "${IR[tb.9]:-}" ] || die "COST_MAX_TB9: the case tb did not run"
    nine=$(per "${IR[tb.9]}" "$decisions")
    [ "$nine" -le "$COST_MAX_TB9" ] ||
        die "token_bucket, 9 a call: $nine instructions a decision, more than COST_MAX_TB9 ($COST_MAX_TB9)"
    log "token_bucket, 9 a call: $nine instructions a decision (COST_MAX_TB9 $COST_MAX_TB9)"
fi
