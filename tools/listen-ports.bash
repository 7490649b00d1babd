# Sourced by tools/rowlock-sandbox, rowlock-cluster and rowlock-replica: where a test
# server may listen.
#
# Every outgoing TCP connection of the machine takes its local port from the
# ephemeral range (/proc/sys/net/ipv4/ip_local_port_range, 32768-60999 on
# Debian): a listen port picked there and free at start can be taken by any
# client's connection by the time a killed node restarts ("Address already in
# use" on the IST listener, seen on a fresh machine). So servers listen only
# outside that range (and outside ip_local_reserved_ports' owners' reach: the
# port is still checked free), preferring 10000 up to the range's start.
# "Free" means nobody listens there: the servers bind with SO_REUSEADDR, so a
# TIME-WAIT connection of a killed node on its own port does not stop it, and
# outside the ephemeral range no outgoing connection can hold the port.

port_in_use() {
    local out
    if command -v ss >/dev/null; then
        out=$(ss -Htln "sport = :$1" 2>/dev/null || true)
        [[ -n $out ]] && return 0
    fi
    # Something answering on loopback also means "in use".
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# listen_port_window: prints "LOW HIGH", a window of ports that no outgoing
# connection is given (below the ephemeral range if it leaves room, else above
# it).
listen_port_window() {
    local lo=32768 hi=60999 r
    r=$(cat /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || true)
    if [[ $r =~ ^[[:space:]]*([0-9]+)[[:space:]]+([0-9]+) ]]; then
        lo=${BASH_REMATCH[1]} hi=${BASH_REMATCH[2]}
    fi
    if ((lo - 1 - 10000 >= 2000)); then
        printf '%s %s\n' 10000 $((lo - 1))
    elif ((65535 - hi - 1 >= 2000)); then
        printf '%s %s\n' $((hi + 1)) 65535
    else
        # No room outside the range: fall back to 1024-lo (root only binds
        # below 1024, so stay above it).
        printf '%s %s\n' 1025 $((lo > 1026 ? lo - 1 : 1026))
    fi
}

# pick_port_block N HALF: prints the first of N consecutive free ports in the
# listen window, picked at random (so parallel sandboxes rarely meet). HALF is
# "low" (sandboxes) or "high" (cluster nodes): the tools draw from disjoint
# halves, so a sandbox started while a cluster node is down (ctest -j2 runs
# both) can never take that node's ports before it restarts.
pick_port_block() {
    local n=$1 lo hi mid i k base ok
    read -r lo hi < <(listen_port_window)
    mid=$(((lo + hi) / 2))
    case $2 in
        low) hi=$mid ;;
        high) lo=$((mid + 1)) ;;
    esac
    for ((i = 0; i < 200; i++)); do
        base=$((lo + (RANDOM * 32768 + RANDOM) % (hi - lo + 2 - n)))
        ok=1
        for ((k = 0; k < n; k++)); do
            port_in_use $((base + k)) && { ok=0; break; }
        done
        ((ok)) && { printf '%s\n' "$base"; return 0; }
    done
    return 1
}
