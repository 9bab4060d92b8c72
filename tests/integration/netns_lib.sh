# Two emulated hosts for the multi-host tests; sourced after lib.sh.
# two_hosts TAG [RATE] makes network namespaces $H0 and $H1 ("$TAG-h0",
# "$TAG-h1") joined by a veth pair ($IF0 in $H0 with $ADDR0, $IF1 in $H1
# with $ADDR1), and removes them (and $WORK) at exit. With RATE (tc's
# units: 1gbit, 500mbit), each end's egress is a token bucket (tc tbf) of
# that rate (link_rate below), so each host sends RATE and receives RATE at
# once, like a NIC. Traffic inside a host (loopback) is not limited.
# Needs root (CAP_SYS_ADMIN) and iproute2: skips the test (exit 77) where
# namespaces cannot be made, as in an unprivileged container, or, with
# RATE, where tc cannot add a tbf qdisc.
two_hosts() {
  local tag="$1" rate="${2:-}"
  command -v ip > /dev/null || { echo "SKIP: no ip (iproute2)"; exit 77; }
  H0="$tag-h0" H1="$tag-h1" IF0="$tag-a" IF1="$tag-b" ADDR0=10.78.0.1 ADDR1=10.78.0.2
  trap 'ip netns del "$H0" 2> /dev/null || true; ip netns del "$H1" 2> /dev/null || true; rm -rf "$WORK"' EXIT
  ip netns add "$H0" 2> /dev/null || { echo "SKIP: cannot create network namespaces here"; exit 77; }
  ip netns add "$H1"
  ip link add "$IF0" type veth peer name "$IF1"
  ip link set "$IF0" netns "$H0"
  ip link set "$IF1" netns "$H1"
  ip -n "$H0" addr add "$ADDR0/24" dev "$IF0"
  ip -n "$H1" addr add "$ADDR1/24" dev "$IF1"
  local h
  for h in "$H0" "$H1"; do ip -n "$h" link set lo up; done
  ip -n "$H0" link set "$IF0" up
  ip -n "$H1" link set "$IF1" up
  [ -z "$rate" ] || link_rate "$rate"
}

# link_rate RATE: (re)sets the token bucket on both ends of the link
# between $H0 and $H1 to RATE (tc's units: 1gbit, 100mbit). The bucket
# holds 1 ms of the rate and at least 128 KiB (a 64 KiB GSO packet must
# fit, or tbf caps below the rate), so a message of about that size sent
# after an idle gap passes at veth speed; only larger ones see the rate.
link_rate() {
  command -v tc > /dev/null || { echo "SKIP: no tc (iproute2) to limit the link"; exit 77; }
  local bps burst limit h
  bps=$(python3 -c 'import re,sys
m = re.fullmatch(r"([0-9.]+)(k|m|g)?bit", sys.argv[1].lower())
if not m: sys.exit("link_rate: bad rate %r (e.g. 1gbit, 500mbit)" % sys.argv[1])
print(int(float(m.group(1)) * {None: 1, "k": 1e3, "m": 1e6, "g": 1e9}[m.group(2)]))' "$1") || exit 1
  burst=$(( bps / 8 / 1000 > 131072 ? bps / 8 / 1000 : 131072 ))
  limit=$(( bps / 8 / 50 > 4 * burst ? bps / 8 / 50 : 4 * burst ))
  for h in "$H0:$IF0" "$H1:$IF1"; do
    ip netns exec "${h%%:*}" tc qdisc replace dev "${h#*:}" root tbf rate "$bps" burst "$burst" limit "$limit" ||
      { echo "SKIP: tc cannot add a tbf qdisc here"; exit 77; }
  done
}

# A free TCP port (in this namespace; namespaces start with all ports free).
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
