#!/usr/bin/env bash
# tools/listen-ports.bash (issue 23 item 3): test servers listen outside the
# kernel's ephemeral port range, sandboxes and cluster nodes in disjoint
# halves, and only on ports nobody listens on. No server needed.
set -euo pipefail
. "$(dirname "$0")/../../tools/listen-ports.bash"
fail() { echo "test_listen_ports: $*" >&2; exit 1; }

read -r elo ehi < /proc/sys/net/ipv4/ip_local_port_range
read -r lo hi < <(listen_port_window)
((lo >= 1025 && hi <= 65535 && lo < hi)) || fail "bad window $lo-$hi"
((hi < elo || lo > ehi)) || fail "window $lo-$hi overlaps the ephemeral range $elo-$ehi"
mid=$(((lo + hi) / 2))
for _ in $(seq 20); do
    p=$(pick_port_block 1 low) || fail "no port in the low half"
    ((p >= lo && p <= mid)) || fail "sandbox port $p outside $lo-$mid"
    b=$(pick_port_block 12 high) || fail "no block in the high half"
    ((b > mid && b + 11 <= hi)) || fail "cluster block $b..$((b + 11)) outside $((mid + 1))-$hi"
done
# A port somebody listens on is never picked: listen on one, then ask
# port_in_use (what both pickers check).
exec 3< <(python3 -c '
import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(1)
print(s.getsockname()[1], flush=True); time.sleep(30)')
listener=$!
trap 'kill "$listener" 2>/dev/null || true' EXIT
read -r busy <&3
port_in_use "$busy" || fail "port_in_use missed a listening port ($busy)"
echo "test_listen_ports: window $lo-$hi (ephemeral $elo-$ehi): OK"
