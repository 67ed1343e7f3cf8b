#!/usr/bin/env bash
# A reservation's cost (issue 38): a Reserve + Commit pair against one
# Acquire, through permitd, in Redis instructions and in client time.
#
#   tests/bench/reserve-cost.sh [PERMITD]   (default: build/bench/server/permitd,
#                                            else build/test/server/permitd)
#
# A Redis of its own runs under valgrind's callgrind with counting off
# (as tests/bench/redis-cost.sh); one permitd (--app-auth off) in front of
# it, one token-bucket policy written by hand (max 10^9, rate 0.0001/s:
# every call is allowed and writes its state). For each case the same
# client (one keep-alive HTTP/1.1 connection, JSON) sends COST_N calls
# (default 300) on COST_N different keys after a warm-up, with counting on
# only while they run:
#   acquire      one Acquire of 5 permits
#   pair         Reserve 10, then Commit 5 (5 refunded): what a caller of
#                reservations pays per unit of work
#   pair_charge  Reserve 5, then Commit 10 (5 charged beyond the estimate)
#   pair_cancel  Reserve 10, then Cancel
# and reports Redis instructions per call (Redis's work, which the
# machine's load does not move) and the client's mean time per call
# (which it does: read the ratio). Progress on stderr, a markdown table on
# stdout. Needs valgrind, redis-server, redis-cli, python3.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
permitd=${1:-}
if [ -z "$permitd" ]; then
    for p in "$root/build/bench/server/permitd" "$root/build/test/server/permitd"; do
        [ -x "$p" ] && { permitd=$p; break; }
    done
fi
[ -x "${permitd:-}" ] || { echo "reserve-cost: no permitd binary (build it first)" >&2; exit 1; }
n=${COST_N:-300}
log() { echo "reserve-cost: [${SECONDS}s] $*" >&2; }
die() { echo "reserve-cost: $*" >&2; exit 1; }
for c in valgrind callgrind_control redis-server redis-cli python3; do
    command -v "$c" >/dev/null || die "needs $c"
done

tmp=$(mktemp -d /tmp/permitd-reserve-cost-XXXXXX)
vg_pid= pd_pid=
cleanup() {
    [ -n "$pd_pid" ] && kill "$pd_pid" 2>/dev/null && wait "$pd_pid" 2>/dev/null
    [ -n "$vg_pid" ] && kill "$vg_pid" 2>/dev/null && wait "$vg_pid" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT

. "$root/tests/stack/free-port.sh"   # free_port: below the ephemeral range
rport=$(free_port)
valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$tmp/callgrind.out" \
    redis-server --port "$rport" --bind 127.0.0.1 --save '' --appendonly no \
    --dir "$tmp" --protected-mode no > "$tmp/valgrind.log" 2>&1 &
vg_pid=$!
for _ in $(seq 1 300); do
    redis-cli -p "$rport" PING 2>/dev/null | grep -q PONG && break
    sleep 0.1
done
redis-cli -p "$rport" PING | grep -q PONG || die "redis-server under valgrind did not start"
redis-cli -p "$rport" HSET 'permitd:{bench}:policy' name bench apps '*' max_permits 1000000000 \
    rate 0.0001 version 1 enabled 1 >/dev/null

aport=$(free_port)
dport=$(free_port)
"$permitd" --listen "127.0.0.1:$aport" --admin-listen "127.0.0.1:$dport" --app-auth off \
    --redis-url "redis://127.0.0.1:$rport" --redis-timeout-ms 5000 > "$tmp/permitd.log" 2>&1 &
pd_pid=$!
for _ in $(seq 1 300); do
    (exec 3<>"/dev/tcp/127.0.0.1/$aport") 2>/dev/null && break
    sleep 0.1
done

# The client: one case, n calls (warm: 20 before); prints the mean ms per call.
client() {
    python3 - "$aport" "$1" "$2" "$3" <<'EOF'
import http.client, json, sys, time
port, case, n, offset = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
c = http.client.HTTPConnection("127.0.0.1", port)
def rpc(m, msg):
    c.request("POST", "/permit.v1.RateLimitService/" + m, json.dumps(msg),
              {"Content-Type": "application/json"})
    r = c.getresponse()
    body = json.loads(r.read())
    if r.status != 200:
        sys.exit("%s: %d %r" % (m, r.status, body))
    return body
def one(i):
    key = "k%d" % (offset + i)
    if case == "acquire":
        if not rpc("Acquire", {"bucket": "bench", "app": "a", "key": key, "permits": 5})["allowed"]:
            sys.exit("denied")
        return
    est, actual = {"pair": (10, 5), "pair_charge": (5, 10), "pair_cancel": (10, None)}[case]
    m = rpc("Reserve", {"app": "a", "items": [{"bucket": "bench", "key": key, "estimate": est}]})
    if not m.get("allowed"):
        sys.exit("reserve refused: %r" % m)
    if actual is None:
        rpc("Cancel", {"app": "a", "reservationId": m["reservationId"]})
    else:
        rpc("Commit", {"app": "a", "reservationId": m["reservationId"], "actual": [actual]})
t0 = time.monotonic()
for i in range(n):
    one(i)
print("%.3f" % ((time.monotonic() - t0) * 1000 / n))
EOF
}

declare -A IR MS
dumps=0
offset=0
cases="acquire pair pair_charge pair_cancel"
for c in $cases; do
    client "$c" 20 "$offset" >/dev/null        # warm-up: scripts loaded, connections made
    offset=$(( offset + 1000000 ))
    callgrind_control -i on "$vg_pid" >/dev/null
    MS[$c]=$(client "$c" "$n" "$offset")
    callgrind_control -i off "$vg_pid" >/dev/null
    offset=$(( offset + 1000000 ))
    callgrind_control --dump="$c" "$vg_pid" >/dev/null
    dump=$tmp/callgrind.out.$(( ++dumps ))
    IR[$c]=$(awk '/^totals:/ {print $2; exit}' "$dump")
    [ -n "${IR[$c]}" ] || die "no instruction count in $dump"
    log "$c: ${IR[$c]} instructions, ${MS[$c]} ms a call ($n calls)"
done

echo "| case | Redis instructions per call | vs one Acquire | client ms per call (loaded machine: read the ratio) |"
echo "|---|---|---|---|"
for c in $cases; do
    per=$(( IR[$c] / n ))
    echo "| $c | $per | $(python3 -c "print('%.1f' % (${IR[$c]} / ${IR[acquire]}))")x | ${MS[$c]} |"
done
