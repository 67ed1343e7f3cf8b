# tests/stack/free-port.sh - sourced by the scripts that start servers of
# their own (tests/bench/*.sh): free_port [BELOW] prints a TCP port nothing
# listens on at 127.0.0.1, drawn at random from 10000 up to the kernel's
# ephemeral range (or up to BELOW, for a server that also takes port +
# 10000: a cluster node's bus).
#
# Not from the ephemeral range: a port the kernel hands out for a bind to 0
# comes from it, and so does the source port of every outgoing connection
# of every test running beside this one; one of those took such a port
# between the pick and the server's own bind (redis-cost.sh's Redis under
# valgrind: "bind: Address already in use", in a loaded suite run). The
# pick is still no reservation: another script may draw the same port
# before the server binds it. redis-cost.sh, whose valgrind start takes a
# second or more, starts its Redis again on another port then; the other
# callers' servers bind within milliseconds of the pick.
_free_port_eph=$(awk '{print $1}' /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
[ "${_free_port_eph:-0}" -gt 12000 ] 2>/dev/null || _free_port_eph=32768

free_port() {
    local below=${1:-$_free_port_eph} p _
    [ "$below" -gt 11000 ] || { echo "free_port: no room below $below" >&2; return 1; }
    for _ in $(seq 1 500); do
        p=$(( 10000 + RANDOM % (below - 10000) ))
        (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || { echo "$p"; return 0; }
    done
    echo "free_port: no free port in 10000..$below" >&2
    return 1
}
