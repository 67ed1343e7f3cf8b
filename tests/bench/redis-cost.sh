#!/usr/bin/env bash
# Redis's work per decision, counted in instructions rather than timed.
#
#   tests/bench/redis-cost.sh [SCRIPT]     (default: lua/bucket.lua)
#
# usec_per_call moves with whatever else the machine is doing; the number
# of instructions Redis executes for the same calls does not (within about
# 2%: the Redis clock and the allocator's state vary). So a change to the
# script is judged here, and the naive script is compared on the same
# footing as permitd's.
#
# A Redis of its own runs under valgrind's callgrind with counting off. It
# is filled with one bucket state for each of 100,000 keys (the 100k-keys
# case of tests/bench/run.sh, in its steady state: every decision reads a
# state and writes it back), then counts only while it answers a fixed list
# of calls sent with redis-cli --pipe:
#   one Acquire per call          (what redis-benchmark sends: the ceiling)
#   9 Acquires of one policy       (what a worker sends under run.sh's load:
#                                   9.1 decisions per call in its last run)
#   an AcquireBatch of 100
#   naive.lua, one per call        (HMGET + HSET + PEXPIRE, for comparison)
# Keys are drawn at random from the 100,000 with a fixed seed.
#
# Prints a markdown table on stdout (run.sh puts it in RESULTS.md), progress
# on stderr. Needs valgrind, redis-server, redis-cli. Knobs: COST_CALLS
# (decisions per case, 9000), COST_KEEP=1 (keep the temporary directory with
# the calls sent and callgrind's dumps).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
script=${1:-$root/lua/bucket.lua}
decisions=${COST_CALLS:-9000}
nkeys=100000
log() { echo "redis-cost: $*" >&2; }
die() { echo "redis-cost: $*" >&2; exit 1; }

[ -r "$script" ] || die "no script at $script"
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

port=""
for _ in 1 2 3 4 5 6 7 8 9 10; do
    p=$(( 20000 + RANDOM % 40000 ))
    (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || { port=$p; break; }
done
[ -n "$port" ] || die "found no free port"

valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$tmp/callgrind.out" \
    redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
    --dir "$tmp" --protected-mode no > "$tmp/valgrind.log" 2>&1 &
vg_pid=$!
for _ in $(seq 1 300); do
    redis-cli -p "$port" PING 2>/dev/null | grep -q PONG && break
    kill -0 "$vg_pid" 2>/dev/null || die "redis-server under valgrind exited"
    sleep 0.1
done
redis-cli -p "$port" PING 2>/dev/null | grep -q PONG || die "redis-server under valgrind did not start"
rcli() { redis-cli -p "$port" "$@"; }

rcli HSET 'b:{keys}:policy' name keys apps 'web,bench' max_permits 1000000 rate 0.01 \
    version 1 enabled 1 >/dev/null
sha=$(rcli -x SCRIPT LOAD < "$script")
naive_sha=$(rcli -x SCRIPT LOAD < "$here/naive.lua")

# calls KIND ITEMS NCALLS SEED: the RESP of NCALLS script calls of ITEMS
# decisions each; KIND all: every key once, in order (the fill).
calls() {
    awk -v kind="$1" -v items="$2" -v ncalls="$3" -v seed="$4" -v nkeys="$nkeys" \
        -v sha="$sha" -v naive="$naive_sha" '
    function bulk(s) { return "$" length(s) "\r\n" s "\r\n" }
    function key(   k) {
        if (kind == "all") return sprintf("user-%06d", next_key++)
        return sprintf("user-%06d", int(rand() * nkeys))
    }
    BEGIN {
        srand(seed)
        for (c = 0; c < ncalls; c++) {
            if (kind == "naive") {
                printf "*7\r\n%s%s%s%s%s%s%s", bulk("EVALSHA"), bulk(naive), bulk("1"),
                    bulk("naive:{keys}:" key()), bulk("1000000"), bulk("0.01"), bulk("1")
                continue
            }
            # lua/bucket.lua: the bucket keys, then "take", one policy and
            # its limits (version stamp, max_permits, rate, no rate
            # history), then per item its policy (1) and permits (1).
            n = (kind == "all" && nkeys - next_key < items) ? nkeys - next_key : items
            printf "*%d\r\n%s%s%s", 9 + 3 * n, bulk("EVALSHA"), bulk(sha), bulk(n)
            for (i = 0; i < n; i++)
                printf "%s", bulk("b:{keys}:k:" key())
            printf "%s%s%s%s%s%s", bulk("take"), bulk("1"), bulk("1"), bulk("1000000"),
                bulk("0.01"), bulk("")
            for (i = 0; i < n; i++)
                printf "%s%s", bulk("1"), bulk("1")
        }
    }'
}

# pipe FILE: sends it, fails unless every reply is one without an error
pipe() {
    local out
    out=$(rcli --pipe < "$1" 2>&1 | tail -n 1)
    case $out in
        "errors: 0, replies: "*) ;;
        *) die "redis-cli --pipe < $1: $out" ;;
    esac
}

log "filling $nkeys bucket states (and $nkeys naive ones), counting off"
calls all 100 $(( (nkeys + 99) / 100 )) 1 > "$tmp/fill.resp"
pipe "$tmp/fill.resp"
awk -v n="$nkeys" -v sha="$naive_sha" 'function bulk(s) { return "$" length(s) "\r\n" s "\r\n" }
    BEGIN { for (i = 0; i < n; i++) printf "*7\r\n%s%s%s%s%s%s%s", bulk("EVALSHA"), bulk(sha),
            bulk("1"), bulk(sprintf("naive:{keys}:user-%06d", i)), bulk("1000000"),
            bulk("0.01"), bulk("1") }' > "$tmp/fill-naive.resp"
pipe "$tmp/fill-naive.resp"
filled=$(rcli DBSIZE)   # the states, and the policy
[ "$filled" -eq $(( 2 * nkeys + 1 )) ] || die "the fill left $filled keys, not $(( 2 * nkeys + 1 ))"

# count NAME KIND ITEMS: Redis instructions for $decisions decisions
declare -A IR
count() {
    local name=$1 kind=$2 items=$3 dump
    calls "$kind" "$items" $(( decisions / items )) 2 > "$tmp/$name.resp"
    callgrind_control -i on "$vg_pid" >/dev/null
    pipe "$tmp/$name.resp"
    callgrind_control -i off "$vg_pid" >/dev/null
    callgrind_control --dump="$name" "$vg_pid" >/dev/null
    dump=$(ls -t "$tmp"/callgrind.out.* | head -n 1)
    IR[$name]=$(awk '/^totals:/ {print $2; exit}' "$dump")
    [ -n "${IR[$name]}" ] || die "no instruction count in $dump"
    IR[$name.calls]=$(( decisions / items ))
    log "$name: ${IR[$name]} instructions, $(( decisions / items )) calls"
}
count single take 1
count coalesced take 9
count batch take 100
count naive naive 1

per() { awk -v t="$1" -v n="$2" 'BEGIN {printf "%.0f", t / n}'; }
naive_per=$(per "${IR[naive]}" "$decisions")
echo "| call (100k keys, each decision reads and writes a state) | decisions per call | Redis instructions per decision | ÷ naive script's |"
echo "|---|---:|---:|---:|"
for c in "single|permitd, one Acquire per call (the ceiling's call)|1" \
         "coalesced|permitd, the Acquires a worker sends together|9" \
         "batch|permitd, AcquireBatch|100" \
         "naive|naive.lua, one per call|1"; do
    IFS='|' read -r name label items <<< "$c"
    p=$(per "${IR[$name]}" "$decisions")
    echo "| $label | $items | $(printf "%'d" "$p") | $(awk -v a="$p" -v b="$naive_per" 'BEGIN {printf "%.2f×", a / b}') |"
done
