#!/usr/bin/env bash
# permitd on a Redis Cluster, measured: the cluster row of issue 19.
#
#   tests/bench/cluster.sh
#
# One policy (`keys`: max 1,000,000, 0.01/s, so every request is allowed and
# writes its bucket), binary Acquire over 100,000 keys (user-000000..
# user-099999, random per request), with the same wrk settings as run.sh
# (-t1 -c50, keep-alive, loopback, acquire.lua, a warm-up and then a run
# bounded in time), against three Redis set-ups started here side by side:
#   single  one plain Redis (tests/stack/redis.sh), as run.sh measures it;
#   c1      a cluster of 1 master holding all 16384 slots;
#   c3      a cluster of 3 masters (no replicas by default, so each master's
#           cost compares with the single Redis's; BENCH_CLUSTER_REPLICAS=1
#           uses tests/stack/redis-cluster.sh: 3 masters + 3 replicas).
# permitd is the release build of run.sh (build/bench), with its policy in
# a migrated MariaDB loaded by its sync, one instance per set-up.
#
# Why: this box has 2 cores, so throughput cannot grow with masters here.
# What the run can show (issue 19) is where the decisions go and what they
# cost: per master its share of the decisions and of the keys, its CPU per
# decision (INFO CPU delta ÷ its decisions) next to the single Redis's, and
# how many requests met a redirect. Whether one policy's keys spread over the
# masters depends on the key layout of the build (one `{NAME}` slot per
# policy, or a slot per keyed bucket): the script reports what it sees.
#
# Prints the tables and writes them, with the machine, the load average at
# start and end, the busiest other processes and the commands, to
# tests/bench/RESULTS-cluster.md.
#
# Knobs (environment): BENCH_DURATION (s per measured run, 5), BENCH_ROUNDS
# (2: the three set-ups run in turn, round after round; each keeps its best
# round), BENCH_WARMUP (s, 2), BENCH_CONNECTIONS (50), BENCH_WRK_THREADS (1),
# BENCH_PERMITD_THREADS (permitd --threads: one per CPU), BENCH_CLUSTER_REPLICAS
# (0), BENCH_KEEP (1: keep the temporary directory), BENCH_RESULTS (where to
# write, tests/bench/RESULTS-cluster.md), BENCH_PERMITD (a permitd to measure
# instead of a Release build: the suite's smoke run), BENCH_NOTE (a line for the results,
# e.g. why the numbers may be noisy).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
DURATION=${BENCH_DURATION:-5}
ROUNDS=${BENCH_ROUNDS:-2}
WARMUP=${BENCH_WARMUP:-2}
CONNS=${BENCH_CONNECTIONS:-50}
WRK_THREADS=${BENCH_WRK_THREADS:-1}
USED_THREADS=${BENCH_PERMITD_THREADS:-$(nproc)}
REPLICAS=${BENCH_CLUSTER_REPLICAS:-0}
RESULTS=${BENCH_RESULTS:-$here/RESULTS-cluster.md}
NKEYS=100000
PREFIX=b:
APP=bench
POLICY=keys
API=/permit.v1.RateLimitService
CASES=(single c1 c3)

t_start=$(date +%s)
log() { echo "cluster-bench: $*" >&2; }
die() { echo "cluster-bench: $*" >&2; exit 1; }

# What else uses the CPU: the busiest processes over one second (top's
# second sample; its first is the average since each process started).
# Processes of this run (pids in $ours) are marked "ours".
ours=""
busy_others() {
    top -b -n 2 -d 1 -w 160 -o %CPU 2>/dev/null |
        awk -v ours=" $ours " '/^top -/ {n++} n == 2 && /^ *[0-9]+ / && $9 + 0 >= 1 {
                 printf "%s %s%% (pid %s%s)\n", $12, $9, $1, (index(ours, " " $1 " ") ? ", ours" : "")
                 if (++k == 6) exit }'
}
load_start=$(cut -d' ' -f1-3 /proc/loadavg)
busy_start=$(busy_others)
log "load average at start: $load_start; busiest processes: $(echo "$busy_start" | paste -sd ';' | sed 's/;/; /g')"

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

tmp=$(mktemp -d /tmp/permitd-cbench-XXXXXX)
declare -A PERMITD_PID API_PORT ADMIN_PORT NODES URL
cluster_dirs=()

cleanup() {
    local rc=$? c d
    set +e
    for c in "${!PERMITD_PID[@]}"; do
        kill "${PERMITD_PID[$c]}" 2>/dev/null; wait "${PERMITD_PID[$c]}" 2>/dev/null
    done
    "$root/tests/stack/redis.sh" stop "$tmp/redis" >/dev/null 2>&1
    for d in "${cluster_dirs[@]}"; do stop_cluster "$d"; done
    "$root/tests/stack/mariadb.sh" stop "$tmp/mariadb" >/dev/null 2>&1
    if [ "$rc" -ne 0 ]; then
        for f in "$tmp"/permitd.*.log; do
            [ -f "$f" ] && { echo "--- $f (tail)" >&2; tail -n 15 "$f" >&2; }
        done
    fi
    if [ "${BENCH_KEEP:-0}" = 1 ] || [ "$rc" -ne 0 ]; then
        echo "cluster-bench: logs kept in $tmp" >&2
    else
        rm -rf "$tmp"
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# A port nothing listens on, below the kernel's ephemeral range (as run.sh).
port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
. "$root/tests/stack/free-port.sh"   # free_port: below the ephemeral range

# start_cluster DIR N: N redis-servers in cluster mode, masters only, the
# 16384 slots split into N equal ranges (CLUSTER ADDSLOTSRANGE), joined with
# CLUSTER MEET; waits until every node says cluster_state:ok and knows N
# nodes. Prints the ports, space-separated. Each port + 10000 (the cluster
# bus) must be free too. --cluster-announce-ip: a node that never met
# another does not know its own address, and its CLUSTER SHARDS / SLOTS
# entry has none (permitd then takes the seed's address, but redirects
# would name no host). The caller adds DIR to cluster_dirs first (this
# runs in a subshell), so that cleanup stops them with stop_cluster DIR.
start_cluster() {
    local dir=$1 n=$2 ports=() p i lo hi
    mkdir -p "$dir"
    while [ ${#ports[@]} -lt "$n" ]; do
        p=$(free_port $(( _free_port_eph - 10000 )))     # its bus below the range too
        port_free $(( p + 10000 )) || continue
        mkdir -p "$dir/node-$p"
        redis-server --port "$p" --bind 127.0.0.1 --protected-mode no \
            --cluster-enabled yes --cluster-config-file "$dir/node-$p/nodes.conf" \
            --cluster-node-timeout 1000 --cluster-announce-ip 127.0.0.1 \
            --save '' --appendonly no --dir "$dir/node-$p" \
            --daemonize yes --pidfile "$dir/node-$p/redis.pid" \
            --logfile "$dir/node-$p/node.log" || continue
        for _ in $(seq 1 100); do
            redis-cli -p "$p" ping 2>/dev/null | grep -q PONG && break
            sleep 0.05
        done
        redis-cli -p "$p" ping 2>/dev/null | grep -q PONG || continue
        ports+=("$p")
        echo "$p" >> "$dir/ports"
    done
    for i in "${!ports[@]}"; do
        lo=$(( 16384 * i / n )) hi=$(( 16384 * (i + 1) / n - 1 ))
        redis-cli -p "${ports[$i]}" CLUSTER ADDSLOTSRANGE "$lo" "$hi" | grep -q OK ||
            die "CLUSTER ADDSLOTSRANGE $lo $hi on port ${ports[$i]} failed"
        [ "$i" -eq 0 ] || redis-cli -p "${ports[0]}" CLUSTER MEET 127.0.0.1 "${ports[$i]}" >/dev/null
    done
    for _ in $(seq 1 200); do
        local ok=1
        for p in "${ports[@]}"; do
            redis-cli -p "$p" CLUSTER INFO | tr -d '\r' |
                awk -v n="$n" '/^cluster_state:/ {s = $0} /^cluster_known_nodes:/ {k = $0}
                    END {exit !(s == "cluster_state:ok" && k == "cluster_known_nodes:" n)}' ||
                { ok=0; break; }
        done
        [ "$ok" = 1 ] && { echo "${ports[*]}"; return 0; }
        sleep 0.1
    done
    die "the $n-master cluster in $dir did not reach cluster_state:ok in 20 s"
}
stop_cluster() {
    local dir=$1 p pid
    if [ -f "$dir/ports" ]; then
        for p in $(cat "$dir/ports"); do
            pid=$(cat "$dir/node-$p/redis.pid" 2>/dev/null) || continue
            redis-cli -p "$p" SHUTDOWN NOSAVE >/dev/null 2>&1 || true
            for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
            kill -9 "$pid" 2>/dev/null || true
        done
        rm -f "$dir/ports"
    fi
    # the 3+3 stack cluster (BENCH_CLUSTER_REPLICAS=1) stops itself
    [ -f "$dir/stack" ] && "$root/tests/stack/redis-cluster.sh" stop "$dir" >/dev/null 2>&1
    return 0
}

# (a) one Redis
"$root/tests/stack/redis.sh" start "$tmp/redis" > "$tmp/redis.env"
NODES[single]=$(sed -n 's/^PERMITD_TEST_REDIS_PORT=//p' "$tmp/redis.env")
URL[single]="redis://127.0.0.1:${NODES[single]}"
# (b) a cluster of one master
cluster_dirs+=("$tmp/c1")
NODES[c1]=$(start_cluster "$tmp/c1" 1) || die "could not start the 1-master cluster"
URL[c1]="redis+cluster://127.0.0.1:${NODES[c1]}"
# (c) three masters, without replicas unless asked
if [ "$REPLICAS" = 1 ]; then
    mkdir -p "$tmp/c3"; touch "$tmp/c3/stack"; cluster_dirs+=("$tmp/c3")
    "$root/tests/stack/redis-cluster.sh" start "$tmp/c3" > "$tmp/c3.env"
    seeds=$(sed -n 's/^PERMITD_TEST_CLUSTER_SEEDS=//p' "$tmp/c3.env")
    NODES[c3]=$(echo "$seeds" | tr ',' '\n' | head -3 | sed 's/^.*://' | tr '\n' ' ')
    URL[c3]="redis+cluster://$seeds"
    c3_what="3 masters + 3 replicas (tests/stack/redis-cluster.sh)"
else
    cluster_dirs+=("$tmp/c3")
    NODES[c3]=$(start_cluster "$tmp/c3" 3) || die "could not start the 3-master cluster"
    URL[c3]="redis+cluster://$(for p in ${NODES[c3]}; do printf '127.0.0.1:%s,' "$p"; done | sed 's/,$//')"
    c3_what="3 masters, no replicas"
fi
for c in "${CASES[@]}"; do log "$c: ${URL[$c]}"; done

"$root/tests/stack/mariadb.sh" start "$tmp/mariadb" > "$tmp/mariadb.env"
mysql_url=$(sed -n 's/^PERMITD_TEST_MYSQL_URL=//p' "$tmp/mariadb.env")
mysql_sock=$(sed -n 's/^PERMITD_TEST_MYSQL_SOCKET=//p' "$tmp/mariadb.env")
sql() { mariadb --no-defaults --protocol=socket --socket="$mysql_sock" -uroot permitd -e "$1"; }
PERMITD_MYSQL_URL=$mysql_url "$permitd" migrate up > "$tmp/migrate.log" 2>&1 ||
    die "permitd migrate up failed (see $tmp/migrate.log)"
sql "INSERT INTO policies (name, max_permits, rate, created_by, updated_by)
         VALUES ('$POLICY', 1000000, 0.01, 'bench', 'bench');
     INSERT INTO policy_apps (policy_id, app) SELECT id, '$APP' FROM policies WHERE name = '$POLICY';"

# start_permitd CASE: one permitd on the case's Redis, up once an Acquire is
# allowed (the sync has loaded the policy, whatever the key layout).
start_permitd() {
    local c=$1 attempt pid reply=""
    for attempt in 1 2 3 4 5; do
        API_PORT[$c]=$(free_port); ADMIN_PORT[$c]=$(free_port)
        "$permitd" --listen "127.0.0.1:${API_PORT[$c]}" --admin-listen "127.0.0.1:${ADMIN_PORT[$c]}" \
            --redis-url "${URL[$c]}" --redis-prefix "$PREFIX" --mysql-url "$mysql_url" \
            --app-auth off --threads "$USED_THREADS" --log-level warn >> "$tmp/permitd.$c.log" 2>&1 &
        pid=$!
        PERMITD_PID[$c]=$pid
        for _ in $(seq 1 100); do
            reply=$(curl -s -H 'Content-Type: application/json' \
                -d "{\"bucket\":\"$POLICY\",\"app\":\"$APP\",\"key\":\"probe\",\"permits\":1}" \
                "http://127.0.0.1:${API_PORT[$c]}$API/Acquire" 2>/dev/null) || true
            echo "$reply" | grep -Eq '"allowed": ?true' && return 0
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true
        unset "PERMITD_PID[$c]"
        log "$c: permitd did not come up on port ${API_PORT[$c]} (attempt $attempt; last reply: $reply)"
    done
    die "$c: permitd did not come up (see $tmp/permitd.$c.log)"
}
for c in "${CASES[@]}"; do start_permitd "$c"; done

# ------------------------------------------------------ measuring helpers
CLK_TCK=$(getconf CLK_TCK)
declare -A R            # R[<case>@<round>.<metric>], then R[<case>.<metric>]
commands=()

cpu_ticks() { sed 's/^.*) //' "/proc/$1/stat" | awk '{print $12 + $13}'; }
# A node's CPU seconds (used_cpu_sys + used_cpu_user).
node_cpu() {
    redis-cli -p "$1" INFO CPU | tr -d '\r' |
        awk -F: '/^used_cpu_(sys|user):/ {s += $2} END {printf "%.6f", s}'
}
# A node's calls of one command since CONFIG RESETSTAT (INFO commandstats).
node_calls() {
    redis-cli -p "$1" INFO commandstats | tr -d '\r' |
        sed -n "s/^cmdstat_$2:calls=\([0-9]*\).*/\1/p" | awk '{s += $1} END {print s + 0}'
}
# A node's decisions: every request is allowed, and each allowed decision
# writes its bucket once from inside the script (the write commands a
# script issues count in commandstats), so decisions = writes.
node_writes() {
    redis-cli -p "$1" INFO commandstats | tr -d '\r' |
        sed -n 's/^cmdstat_\(set\|psetex\|setex\|hset\|hmset\|pexpire\|pexpireat\|incrby\):calls=\([0-9]*\).*/\2/p' |
        awk '{s += $1} END {print s + 0}'
}
redirects() {   # permitd_redis_redirects_total, every kind summed (0 without a cluster)
    curl -s "http://127.0.0.1:${ADMIN_PORT[$1]}/metrics" |
        awk '/^permitd_redis_redirects_total/ {s += $2} END {printf "%d", s}'
}

wrk_run() {   # wrk_run SECONDS URL LOG
    BENCH_CODEC=proto BENCH_BUCKET=$POLICY BENCH_APP=$APP BENCH_KEYS=$NKEYS \
        wrk -t"$WRK_THREADS" -c"$CONNS" -d"$1s" -s "$here/acquire.lua" "$2" > "$3" 2>&1 || true
}

# measure CASE ROUND: a warm-up, then the measured run; fills R[CASE@ROUND.*]
# and, per master i (in NODES order), R[CASE@ROUND.n<i>.*].
measure() {
    local c=$1 id="$1@$2" url="http://127.0.0.1:${API_PORT[$1]}$API/Acquire"
    local p i c0 c1 x0 x1 l0 line kv
    local -a ports cpu0
    read -ra ports <<< "${NODES[$c]}"
    wrk_run "$WARMUP" "$url" "$tmp/$id.warmup.log"
    for i in "${!ports[@]}"; do
        redis-cli -p "${ports[$i]}" CONFIG RESETSTAT >/dev/null
        cpu0[$i]=$(node_cpu "${ports[$i]}")
    done
    c0=$(cpu_ticks "${PERMITD_PID[$c]}"); x0=$(redirects "$c")
    l0=$(wc -l < "$tmp/permitd.$c.log")
    wrk_run "$DURATION" "$url" "$tmp/$id.log"
    c1=$(cpu_ticks "${PERMITD_PID[$c]}"); x1=$(redirects "$c")
    # what permitd had to say during the run: how many lines, the first one
    R[$id.logn]=$(( $(wc -l < "$tmp/permitd.$c.log") - l0 ))
    R[$id.log1]=$(tail -n +"$(( l0 + 1 ))" "$tmp/permitd.$c.log" | sed -n '1s/^.*msg=//p' | cut -c1-160)
    line=$(grep '^BENCH ' "$tmp/$id.log" || true)
    [ -n "$line" ] || { log "$id: wrk printed no result:"; cat "$tmp/$id.log" >&2; line="rps=0 requests=0"; }
    for kv in $line; do
        case $kv in
        rps=*) R[$id.rps]=${kv#rps=} ;;
        p99_us=*) R[$id.p99]=${kv#p99_us=} ;;
        requests=*) R[$id.req]=${kv#requests=} ;;
        non2xx=*) R[$id.non2xx]=${kv#non2xx=} ;;
        sockerr=*) R[$id.sockerr]=${kv#sockerr=} ;;
        esac
    done
    R[$id.cpu_us]=$(awk -v t=$(( c1 - c0 )) -v hz="$CLK_TCK" -v n="${R[$id.req]}" \
        'BEGIN {printf "%.1f", (n > 0 ? t * 1e6 / hz / n : 0)}')
    R[$id.redirects]=$(( x1 - x0 ))
    local dsum=0 csum=0
    for i in "${!ports[@]}"; do
        p=${ports[$i]}
        R[$id.n$i.cpu_s]=$(awk -v a="${cpu0[$i]}" -v b="$(node_cpu "$p")" 'BEGIN {printf "%.6f", b - a}')
        R[$id.n$i.evalsha]=$(node_calls "$p" evalsha)
        R[$id.n$i.dec]=$(node_writes "$p")
        R[$id.n$i.keys]=$(redis-cli -p "$p" DBSIZE)
        dsum=$(( dsum + ${R[$id.n$i.dec]} ))
        csum=$(awk -v a="$csum" -v b="${R[$id.n$i.cpu_s]}" 'BEGIN {printf "%.6f", a + b}')
    done
    R[$id.dec]=$dsum
    R[$id.rcpu_us]=$(awk -v s="$csum" -v n="$dsum" 'BEGIN {printf "%.1f", (n > 0 ? s * 1e6 / n : 0)}')
    log "$(printf '%-9s %9.0f req/s  p99 %6s us  permitd %5s us/req  Redis %5s us/decision  redirects %s' \
        "$id" "${R[$id.rps]}" "${R[$id.p99]:-}" "${R[$id.cpu_us]}" "${R[$id.rcpu_us]}" "${R[$id.redirects]}")"
}

keep_best() {   # keep_best CASE: R[CASE.*] := R[CASE@<best round>.*]
    local c=$1 r best=1 best_rps=-1 k all=""
    for r in $(seq 1 "$ROUNDS"); do
        all="$all${all:+ / }$(printf '%.0f' "${R[$c@$r.rps]:-0}")"
        if awk -v a="${R[$c@$r.rps]:-0}" -v b="$best_rps" 'BEGIN {exit !(a > b)}'; then
            best=$r best_rps=${R[$c@$r.rps]:-0}
        fi
    done
    for k in "${!R[@]}"; do
        case $k in "$c@$best".*) R[$c.${k#"$c@$best".}]=${R[$k]} ;; esac
    done
    R[$c.rounds]=$all
}

# ------------------------------------------------------------ measured
# The set-ups run in turn within a round, so that other work on the machine
# moves them alike; idle ones wait on their sockets.
for r in $(seq 1 "$ROUNDS"); do
    for c in "${CASES[@]}"; do
        log "round $r/$ROUNDS: $c"
        measure "$c" "$r"
        commands+=("BENCH_CODEC=proto BENCH_BUCKET=$POLICY BENCH_APP=$APP BENCH_KEYS=$NKEYS wrk -t$WRK_THREADS -c$CONNS -d${DURATION}s -s tests/bench/acquire.lua http://127.0.0.1:PORT$API/Acquire")
    done
done
for c in "${CASES[@]}"; do keep_best "$c"; done

# What the key layout did: one key of the policy as each master holds it,
# and how many masters hold any.
read -ra c3_ports <<< "${NODES[c3]}"
holding=0 sample_keys=""
for p in "${c3_ports[@]}"; do
    k=$(redis-cli -p "$p" --scan --pattern "*user-*" | head -1) || true
    [ -n "$k" ] && { holding=$(( holding + 1 )); sample_keys="$sample_keys${sample_keys:+, }\`$k\` (:$p)"; }
done
if [ "$holding" -ge 2 ]; then
    layout="spread: $holding of ${#c3_ports[@]} masters hold keys of policy \`$POLICY\`"
else
    layout="one slot: all keys of policy \`$POLICY\` on one master (the \`{NAME}\` hash tag)"
fi
log "layout: $layout; e.g. $sample_keys"

ours="${PERMITD_PID[*]} $( { cat "$tmp"/redis/redis.pid "$tmp"/c[13]/node-*/redis.pid \
    "$tmp"/mariadb/*.pid 2>/dev/null || true; } | tr '\n' ' ')"
load_end=$(cut -d' ' -f1-3 /proc/loadavg)
busy_end=$(busy_others)
log "load average at end: $load_end; busiest processes: $(echo "$busy_end" | paste -sd ';' | sed 's/;/; /g')"
elapsed=$(( $(date +%s) - t_start ))

# ------------------------------------------------------------ tables
fmt_ms() { awk -v u="${1:-}" 'BEGIN {if (u == "") print "–"; else printf "%.2f", u / 1000}'; }
pct() { awk -v a="${1:-0}" -v b="${2:-0}" 'BEGIN {if (b > 0) printf "%.1f%%", 100 * a / b; else print "–"}'; }
declare -A TITLE=([single]="single Redis" [c1]="cluster, 1 master" [c3]="cluster, ${c3_what}")

main_table=$(
    echo "| set-up | req/s | p99 ms | non-2xx | permitd CPU µs/req | Redis CPU µs/decision (all nodes) | decisions counted / requests | redirects / request |"
    echo "|---|---:|---:|---:|---:|---:|---:|---:|"
    for c in "${CASES[@]}"; do
        printf '| %s | %.0f | %s | %s | %s | %s | %s | %s |\n' "${TITLE[$c]}" "${R[$c.rps]}" \
            "$(fmt_ms "${R[$c.p99]:-}")" "$(( ${R[$c.non2xx]:-0} + ${R[$c.sockerr]:-0} ))" \
            "${R[$c.cpu_us]}" "${R[$c.rcpu_us]}" \
            "$(awk -v d="${R[$c.dec]}" -v n="${R[$c.req]}" 'BEGIN {if (n > 0) printf "%.3f", d / n; else print "–"}')" \
            "$(awk -v x="${R[$c.redirects]}" -v n="${R[$c.req]}" 'BEGIN {if (n > 0) printf "%.4f", x / n; else print "–"}')"
    done
)
node_table=$(
    echo "| set-up | node | evalsha calls | decisions | share of decisions | decisions / call | keys (DBSIZE) | share of keys | Redis CPU ms | Redis CPU µs/decision | × single Redis's |"
    echo "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    for c in "${CASES[@]}"; do
        read -ra ports <<< "${NODES[$c]}"
        ksum=0
        for i in "${!ports[@]}"; do ksum=$(( ksum + ${R[$c.n$i.keys]} )); done
        for i in "${!ports[@]}"; do
            d=${R[$c.n$i.dec]} e=${R[$c.n$i.evalsha]} s=${R[$c.n$i.cpu_s]}
            printf '| %s | :%s | %s | %s | %s | %s | %s | %s | %.0f | %s | %s |\n' "$c" "${ports[$i]}" "$e" "$d" \
                "$(pct "$d" "${R[$c.dec]}")" \
                "$(awk -v d="$d" -v e="$e" 'BEGIN {if (e > 0) printf "%.2f", d / e; else print "–"}')" \
                "${R[$c.n$i.keys]}" "$(pct "${R[$c.n$i.keys]}" "$ksum")" \
                "$(awk -v s="$s" 'BEGIN {print s * 1000}')" \
                "$(awk -v s="$s" -v d="$d" 'BEGIN {if (d > 0) printf "%.1f", s * 1e6 / d; else print "–"}')" \
                "$(awk -v s="$s" -v d="$d" -v one="${R[single.rcpu_us]}" \
                    'BEGIN {if (d > 0 && one > 0) printf "%.2f", s * 1e6 / d / one; else print "–"}')"
        done
    done
)
echo
echo "$main_table"
echo
echo "$node_table"
echo
echo "layout: $layout"

{
    echo "# permitd on a Redis Cluster: results"
    echo
    echo "Written by \`tests/bench/cluster.sh\` on $(date -u '+%Y-%m-%d %H:%M UTC') in ${elapsed} s."
    [ -n "${BENCH_NOTE:-}" ] && { echo; echo "**Note:** $BENCH_NOTE"; }
    echo
    echo "## Machine"
    echo
    echo "- $(nproc) CPUs: $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1); $(awk '/MemTotal/ {printf "%.1f GB", $2 / 1048576}' /proc/meminfo) RAM"
    echo "- $(uname -sr); $(redis-server --version | awk '{print $1, $2, $3}'); wrk $(wrk -v 2>&1 | awk 'NR == 1 {print $2}')"
    echo "- permitd at git $(git -C "$root" rev-parse --short HEAD)$(git -C "$root" diff --quiet HEAD -- server lua 2>/dev/null || echo ' (server/ or lua/ modified)'), Release build (build/bench), \`--threads $USED_THREADS\`"
    echo "- load average (1, 5, 15 min) at start: $load_start; at end: $load_end"
    echo "- busiest processes over 1 s at start: $(echo "$busy_start" | paste -sd ';' | sed 's/;/; /g')"
    echo "- busiest processes over 1 s at end: $(echo "$busy_end" | paste -sd ';' | sed 's/;/; /g')"
    echo
    echo "## Acquire, binary, 100,000 keys of one policy"
    echo
    echo "wrk \`-t$WRK_THREADS -c$CONNS\`, keep-alive, loopback, ${WARMUP} s warm-up then ${DURATION} s measured;"
    echo "best of $ROUNDS rounds (the set-ups in turn within each round)."
    echo
    echo "$main_table"
    echo
    echo "Per Redis node (of the best round):"
    echo
    echo "$node_table"
    echo
    echo "Key layout seen on the 3 masters: $layout. Keys: $sample_keys."
    echo
    for c in "${CASES[@]}"; do
        [ "${R[$c.logn]:-0}" -gt 0 ] || [ "$(( ${R[$c.non2xx]:-0} + ${R[$c.sockerr]:-0} ))" -gt 0 ] || continue
        echo "$c: ${R[$c.non2xx]:-0} non-2xx replies, ${R[$c.sockerr]:-0} socket errors; permitd logged ${R[$c.logn]:-0} lines during the run, the first: \`${R[$c.log1]:-–}\`."
        echo
    done
    echo "req/s per round: $(for c in "${CASES[@]}"; do printf '%s %s; ' "$c" "${R[$c.rounds]}"; done | sed 's/; $//')."
    echo
    echo "## Reading it"
    echo
    echo "- **decisions** per node: the writes its scripts made in the run (INFO commandstats,"
    echo "  reset after the warm-up): every request is allowed and writes its bucket once,"
    echo "  so writes = decisions (\"decisions counted / requests\" checks it: ≈ 1)."
    echo "- **Redis CPU µs/decision**: the node's used_cpu_sys + used_cpu_user over the run"
    echo "  (INFO CPU) ÷ its decisions; the main table's is every node's CPU ÷ all decisions."
    echo "  An idle master still spends a little (cron, cluster bus). **× single Redis's**:"
    echo "  that cost ÷ the single Redis's µs/decision in its best round."
    echo "- **keys (DBSIZE)**: after the run, so warm-up and earlier rounds count too; a"
    echo "  bucket key lives until its bucket would be full again (100 s here)."
    echo "- **redirects / request**: permitd's permitd_redis_redirects_total (moved + ask)"
    echo "  over the run ÷ requests; 0 while the slot map is current."
    echo "- All processes (wrk, permitd, every Redis node) share $(nproc) cores: throughput"
    echo "  cannot grow with masters here. What can be read is each master's share and its"
    echo "  cost per decision next to the single Redis's."
    echo
    echo "## Commands"
    echo
    echo "Policy in MariaDB (\`permitd migrate up\`, then): \`$POLICY\`, max_permits 1000000, rate 0.01, app $APP; permitd's sync loads it."
    echo "Single Redis: \`tests/stack/redis.sh start DIR\`. Cluster of N masters: N \`redis-server --cluster-enabled yes --cluster-node-timeout 1000 --cluster-announce-ip 127.0.0.1 --save '' --appendonly no\`, \`CLUSTER ADDSLOTSRANGE\` of 16384/N slots each, \`CLUSTER MEET\`$([ "$REPLICAS" = 1 ] && echo "; 3 masters + 3 replicas: \`tests/stack/redis-cluster.sh start DIR\`")."
    echo "permitd: \`build/bench/server/permitd --listen 127.0.0.1:PORT --admin-listen 127.0.0.1:PORT --redis-url URL --redis-prefix $PREFIX --mysql-url mysql://... --app-auth off --threads $USED_THREADS --log-level warn\`,"
    echo "URL \`redis://127.0.0.1:P\` or \`redis+cluster://127.0.0.1:P1,...\`."
    echo
    echo '```'
    printf '%s\n' "${commands[@]}" | awk '!seen[$0]++'
    echo '```'
} > "$RESULTS"

log "wrote $RESULTS"
log "done in ${elapsed} s"
