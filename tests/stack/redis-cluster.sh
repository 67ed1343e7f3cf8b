#!/usr/bin/env bash
# A throw-away Redis Cluster on loopback: 3 masters and 3 replicas, each a
# redis-server with a directory of its own under DIR.
#
#   tests/stack/redis-cluster.sh start DIR   start it on free ports, create the
#                                            cluster, wait until it serves every
#                                            slot and every master has an online
#                                            replica; prints PERMITD_TEST_CLUSTER_*
#   tests/stack/redis-cluster.sh stop DIR    stop every node (SHUTDOWN NOSAVE, then kill)
#
# Printed (shell assignments, for DIR/env):
#   PERMITD_TEST_CLUSTER_SEEDS  127.0.0.1:P1,...,127.0.0.1:P6 (masters first)
#   PERMITD_TEST_CLUSTER_URL    redis+cluster://127.0.0.1:P1,...,127.0.0.1:P6
#   PERMITD_TEST_CLUSTER_DIR    DIR (node N lives in DIR/node-PORT, log node.log)
#
# Why it waits for the replicas: `redis-cli --cluster create` returns before
# they have synced, and a replica that never finished its first sync refuses
# to take over from a killed master, so a failover test would wait for ever
# (/work/shared/notes/redis-cluster.md). --cluster-replica-validity-factor 0
# lets a replica always take over; --repl-diskless-sync-delay 0 starts each
# first sync at once instead of after the default 5 s. Each node also needs
# its port + 10000 free (the cluster bus).
set -euo pipefail

cmd=${1:-}
dir=${2:-}
[ -n "$cmd" ] && [ -n "$dir" ] || { echo "usage: $0 start|stop DIR" >&2; exit 2; }

nodes=6

port_free() {
    ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

die() {
    echo "redis-cluster.sh: $*" >&2
    "$0" stop "$dir" >/dev/null 2>&1 || true
    exit 1
}

# Polls `$@` every 50 ms for up to $limit seconds; 0 when it succeeded.
wait_for() {
    local limit=$1 i
    shift
    for i in $(seq 1 $((limit * 20))); do
        "$@" && return 0
        sleep 0.05
    done
    return 1
}

all_ok() {
    local p
    for p in "${ports[@]}"; do
        redis-cli -p "$p" cluster info 2>/dev/null | grep -q '^cluster_state:ok' || return 1
    done
}

# Every master (a node that owns slots) lists exactly one replica, online.
replicas_online() {
    local p info n=0
    for p in "${ports[@]}"; do
        info=$(redis-cli -p "$p" info replication 2>/dev/null | tr -d '\r')
        case "$info" in
        *role:master*)
            echo "$info" | grep -q '^slave0:.*state=online' || return 1
            n=$((n + 1)) ;;
        esac
    done
    [ "$n" -eq $((nodes / 2)) ]
}

case "$cmd" in
start)
    mkdir -p "$dir"
    dir=$(cd "$dir" && pwd)
    "$0" stop "$dir"    # what an earlier start left running
    ports=()
    tries=0
    while [ ${#ports[@]} -lt $nodes ]; do
        tries=$((tries + 1))
        [ $tries -le 200 ] || die "found no free ports (port and port + 10000) for $nodes nodes"
        p=$(( 20000 + RANDOM % 25000 ))
        case " ${ports[*]:-} " in *" $p "*) continue ;; esac
        port_free "$p" && port_free $((p + 10000)) || continue
        node="$dir/node-$p"
        mkdir -p "$node"
        rm -f "$node/redis.pid" "$node/nodes.conf"
        if ! redis-server --port "$p" --bind 127.0.0.1 --protected-mode no \
                --cluster-enabled yes --cluster-config-file "$node/nodes.conf" \
                --cluster-node-timeout 1000 --cluster-replica-validity-factor 0 \
                --repl-diskless-sync-delay 0 \
                --save '' --appendonly no --dir "$node" \
                --daemonize yes --pidfile "$node/redis.pid" --logfile "$node/node.log"; then
            continue
        fi
        if ! wait_for 5 sh -c "redis-cli -p $p ping 2>/dev/null | grep -q PONG"; then
            # Lost a race for the port with another process: try another one.
            [ -f "$node/redis.pid" ] && kill -9 "$(cat "$node/redis.pid")" 2>/dev/null || true
            continue
        fi
        ports+=("$p")
        echo "$p" >> "$dir/ports"
    done
    addrs=()
    for p in "${ports[@]}"; do addrs+=("127.0.0.1:$p"); done
    redis-cli --cluster create "${addrs[@]}" --cluster-replicas 1 --cluster-yes \
        > "$dir/create.log" 2>&1 || die "redis-cli --cluster create failed (see $dir/create.log)"
    wait_for 30 all_ok || die "cluster_state is not ok on every node after 30 s (logs in $dir)"
    wait_for 30 replicas_online \
        || die "not every master has its replica online after 30 s (logs in $dir)"
    # Masters first: the seed list's order is the one tests try them in.
    masters=() replicas=()
    for p in "${ports[@]}"; do
        if redis-cli -p "$p" role 2>/dev/null | head -1 | grep -q master; then
            masters+=("127.0.0.1:$p")
        else
            replicas+=("127.0.0.1:$p")
        fi
    done
    seeds=$(IFS=,; echo "${masters[*]},${replicas[*]}")
    echo "PERMITD_TEST_CLUSTER_SEEDS=$seeds"
    echo "PERMITD_TEST_CLUSTER_URL=redis+cluster://$seeds"
    echo "PERMITD_TEST_CLUSTER_DIR=$dir"
    ;;
stop)
    [ -f "$dir/ports" ] || exit 0
    for p in $(cat "$dir/ports"); do
        redis-cli -p "$p" shutdown nosave >/dev/null 2>&1 &
    done
    wait
    for p in $(cat "$dir/ports"); do
        pidfile="$dir/node-$p/redis.pid"
        [ -f "$pidfile" ] || continue
        pid=$(cat "$pidfile")
        for _ in $(seq 1 50); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.05
        done
        kill -9 "$pid" 2>/dev/null || true
        rm -f "$pidfile"
    done
    rm -f "$dir/ports"
    ;;
*)
    echo "usage: $0 start|stop DIR" >&2
    exit 2
    ;;
esac
