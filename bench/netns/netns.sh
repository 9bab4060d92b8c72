#!/usr/bin/env bash
# Emulated hosts on one machine: N network namespaces ("hosts") on one switch,
# each behind its own, optionally rate-limited, full-duplex link.
#
#   switch namespace  ${NETNS_PREFIX}-sw : bridge br0 with ports p0 .. p(N-1)
#   host namespace    ${NETNS_PREFIX}-hK : lo + eth0 = 10.77.0.(K+1)/24, the other
#                                          end of port pK (a veth pair)
#
# A link rate R puts a token bucket (tc tbf) on both directions of each host's
# link: on eth0 inside the host (upload) and on pK in the switch (download), so a
# host can send R and receive R at the same time, like a NIC on a non-blocking
# switch. Nothing is added to the machine's own (root) network namespace.
#
# Use as a command (root needed):
#   bench/netns/netns.sh up N [--rate 1gbit] [--rate-of K=2gbit ...] [--delay 1ms] [--mtu 1500]
#   bench/netns/netns.sh status          # namespaces, addresses and qdiscs
#   bench/netns/netns.sh check [A B]     # TCP throughput host A -> host B (python3), default 0 -> 1
#   bench/netns/netns.sh exec K CMD...   # run CMD in host K
#   bench/netns/netns.sh down            # delete every namespace of this prefix
# or source it from a benchmark (bench/overlap.sh, bench/reduction_server_netns.sh):
#   source bench/netns/netns.sh
#   netns_up 2 1gbit; trap netns_cleanup EXIT
#   netns_job_env 2 0                    # MASTER_ADDR/PORT, job id + token, world size
#   netns_spawn 0 0 log0 meshtrain ...   # host 0, rank 0, in the background
#   netns_spawn 1 1 log1 meshtrain ...
#   netns_wait                           # all ranks; stops the rest when one fails
#
# Knobs: NETNS_PREFIX [mt] (namespace names), NETNS_SUBNET [10.77.0]
# (host K is $NETNS_SUBNET.(K+1)), NETNS_BURST [auto: 1 ms of the rate, at least
# 128 KiB; tbf's bucket, bytes], NETNS_LIMIT_MS [20] (tbf queue, in ms of the rate).
#
# Delay (--delay) needs the sch_netem kernel module; this machine's kernel has
# none (tc answers "Specified qdisc kind is unknown"), so only rate limits were
# used for the results in bench/RESULTS.md.

NETNS_PREFIX="${NETNS_PREFIX:-mt}"
NETNS_SUBNET="${NETNS_SUBNET:-10.77.0}"
NETNS_LIMIT_MS="${NETNS_LIMIT_MS:-20}"
NETNS_HOSTS=0
NETNS_PIDS=()
NETNS_PID_NAMES=()

netns_host() { echo "${NETNS_PREFIX}-h$1"; }     # namespace of host K
netns_addr() { echo "${NETNS_SUBNET}.$(($1 + 1))"; }  # address of host K

# "1gbit", "500mbit", "2.5gbit", "100kbit" -> bits per second (integer)
netns_rate_bps() {
  local r="${1,,}"
  python3 -c 'import re,sys
m=re.fullmatch(r"([0-9.]+)\s*(k|m|g|t)?(bit|bps)?", sys.argv[1])
if not m: sys.exit("netns: bad rate %r (e.g. 1gbit, 500mbit)" % sys.argv[1])
v=float(m.group(1))*{None:1,"k":1e3,"m":1e6,"g":1e9,"t":1e12}[m.group(2)]
if m.group(3)=="bps": v*=8
print(int(v))' "$r"
}

# Shape DEV in namespace NS to RATE (tbf), optionally with DELAY (netem).
_netns_shape() {
  local ns="$1" dev="$2" rate="$3" delay="$4"
  [ -z "$rate" ] || [ "$rate" = none ] && [ -z "$delay" ] && return 0
  if [ -n "$delay" ]; then
    if ! ip netns exec "$ns" tc qdisc add dev "$dev" root handle 1: netem delay "$delay" 2>/tmp/netns_tc.err; then
      echo "netns: cannot add a netem delay on $ns/$dev: $(cat /tmp/netns_tc.err) (no sch_netem in this kernel?)" >&2
      return 1
    fi
    [ -z "$rate" ] || [ "$rate" = none ] && return 0
  fi
  local bps burst limit
  bps="$(netns_rate_bps "$rate")" || return 1
  # The bucket must hold 1 ms of traffic and a 64 KiB GSO packet or tbf caps
  # below the rate (64 KiB: 840 Mbit/s of 1 Gbit/s; 128 KiB: 964). It should not
  # be larger: after an idle gap a host may send a whole bucket at veth speed,
  # which a real link never does (gradient buckets of 1 MiB sent after compute
  # gaps got ~0.5 MB each for free with a 4 ms bucket). The queue holds
  # NETNS_LIMIT_MS of traffic.
  burst="${NETNS_BURST:-$(( bps / 8 / 1000 > 131072 ? bps / 8 / 1000 : 131072 ))}"
  limit=$(( bps / 8 * NETNS_LIMIT_MS / 1000 )); [ "$limit" -lt $((4 * burst)) ] && limit=$((4 * burst))
  local parent=(root); [ -n "$delay" ] && parent=(parent 1:1 handle 10:)
  ip netns exec "$ns" tc qdisc add dev "$dev" "${parent[@]}" tbf rate "$bps" burst "$burst" limit "$limit" ||
    { echo "netns: tc tbf failed on $ns/$dev" >&2; return 1; }
}

# netns_up N [RATE] [DELAY] [MTU]: creates the switch and N hosts (deleting
# leftovers of this prefix first). RATE "none" or "" = unlimited (veth speed).
# Per-host rates: NETNS_RATE_OF=(K=RATE ...) overrides RATE for host K.
netns_up() {
  local n="$1" rate="${2:-}" delay="${3:-}" mtu="${4:-1500}"
  [ "$(id -u)" -eq 0 ] || { echo "netns: needs root (ip netns add)" >&2; return 1; }
  [ "$n" -ge 1 ] && [ "$n" -le 250 ] || { echo "netns: 1..250 hosts" >&2; return 1; }
  netns_down quiet
  local sw="${NETNS_PREFIX}-sw"
  ip netns add "$sw" || return 1
  ip -n "$sw" link set lo up
  ip -n "$sw" link add br0 type bridge || return 1
  ip -n "$sw" link set br0 mtu "$mtu" up
  local k h r
  for ((k = 0; k < n; k++)); do
    h="$(netns_host "$k")"
    r="$rate"
    for spec in "${NETNS_RATE_OF[@]:-}"; do [ "${spec%%=*}" = "$k" ] && r="${spec#*=}"; done
    ip netns add "$h" || return 1
    ip -n "$h" link set lo up
    ip link add eth0 netns "$h" mtu "$mtu" type veth peer name "p$k" netns "$sw" mtu "$mtu" || return 1
    ip -n "$sw" link set "p$k" master br0 up
    ip -n "$h" addr add "$(netns_addr "$k")/24" dev eth0
    ip -n "$h" link set eth0 up
    _netns_shape "$h" eth0 "$r" "$delay" || return 1   # host -> switch
    _netns_shape "$sw" "p$k" "$r" "$delay" || return 1 # switch -> host
  done
  NETNS_HOSTS="$n"
  # wait until the bridge forwards (its ports start in "listening" without STP: immediate, but be sure)
  for ((k = 1; k < n; k++)); do
    timeout 5 ip netns exec "$(netns_host 0)" bash -c "exec 3<>/dev/tcp/$(netns_addr "$k")/9" 2>/dev/null  # RST = reachable
  done
  return 0
}

# netns_down [quiet]: deletes every namespace named ${NETNS_PREFIX}-*
# (deleting a namespace deletes its veth ends and qdiscs with it).
netns_down() {
  local ns
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^${NETNS_PREFIX}-(sw|h[0-9]+)$"); do
    # processes still inside keep nothing alive; the namespace goes once they exit
    ip netns pids "$ns" 2>/dev/null | while read -r p; do [ -n "$p" ] && kill "$p" 2>/dev/null; done
    ip netns del "$ns" 2>/dev/null
  done
  [ "${1:-}" = quiet ] || echo "netns: removed ${NETNS_PREFIX}-* namespaces"
  NETNS_HOSTS=0
}

netns_status() {
  local ns
  for ns in $(ip netns list | awk '{print $1}' | grep -E "^${NETNS_PREFIX}-" | sort -V); do
    echo "== $ns"
    ip -n "$ns" -br addr | sed 's/^/   /'
    ip netns exec "$ns" tc qdisc show | { grep -v 'noqueue' || true; } | sed 's/^/   /'
  done
  return 0
}

# netns_drops: packets the rate limiters dropped since netns_up, per link
# ("h0 up 0 down 0 ..."): drops mean the tbf queue overflowed (e.g. incast).
netns_drops() {
  local k out=() up down
  for ((k = 0; k < NETNS_HOSTS; k++)); do
    up="$(ip netns exec "$(netns_host "$k")" tc -s qdisc show dev eth0 | awk '{for (i = 1; i < NF; i++) if ($i == "dropped") {v = $(i + 1); sub(",", "", v); s += v}} END {print s + 0}')"
    down="$(ip netns exec "${NETNS_PREFIX}-sw" tc -s qdisc show dev "p$k" | awk '{for (i = 1; i < NF; i++) if ($i == "dropped") {v = $(i + 1); sub(",", "", v); s += v}} END {print s + 0}')"
    out+=("h$k up ${up:-0} down ${down:-0}")
  done
  local IFS=,; echo "${out[*]}"
}

# netns_check A B [SECONDS]: TCP throughput host A -> host B with python3
# sockets (one stream), in Mbit/s. A sanity check of the emulated link.
netns_check() {
  local a="${1:-0}" b="${2:-1}" secs="${3:-3}" port=5201
  ip netns exec "$(netns_host "$b")" python3 -c '
import socket,sys
s=socket.socket(); s.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1)
s.bind(("0.0.0.0",int(sys.argv[1]))); s.listen(1); c,_=s.accept()
buf=bytearray(1<<20)
while c.recv_into(buf): pass' "$port" &
  local srv=$!
  sleep 0.3
  ip netns exec "$(netns_host "$a")" python3 -c '
import socket,sys,time
for i in range(50):
    try: c=socket.create_connection((sys.argv[1],int(sys.argv[2]))); break
    except OSError: time.sleep(0.1)
else: sys.exit("netns check: cannot connect to host %s" % sys.argv[5])
buf=b"x"*(1<<20)
t0=time.time(); n=0
while time.time()-t0<float(sys.argv[3]): c.sendall(buf); n+=len(buf)
c.shutdown(socket.SHUT_WR); dt=time.time()-t0
print("host %s -> host %s: %.0f Mbit/s (%.1f MB in %.1f s)"%(sys.argv[4],sys.argv[5],n*8/dt/1e6,n/1e6,dt))' \
    "$(netns_addr "$b")" "$port" "$secs" "$a" "$b"
  wait "$srv"
}

# netns_job_env WORLD_SIZE [NUM_REDUCERS]: exports the launch environment every
# rank shares (meshtrain's launchers set the same variables): rendezvous at
# host 0, a fresh port, job id and secret token, TCP between hosts.
netns_job_env() {
  export WORLD_SIZE="$1" LOCAL_RANK=0 LOCAL_WORLD_SIZE=1
  MASTER_ADDR="$(netns_addr 0)"
  MESHTRAIN_JOB_TOKEN="$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')"
  export MASTER_ADDR MASTER_PORT="$((20000 + RANDOM % 20000))" MESHTRAIN_JOB_ID="netns-$$-$RANDOM" MESHTRAIN_JOB_TOKEN
  export MESHTRAIN_TRANSPORT=tcp
  if [ "${2:-0}" -gt 0 ]; then export MESHTRAIN_NUM_SERVERS="$2"; else unset MESHTRAIN_NUM_SERVERS; fi
}

# netns_spawn HOST RANK LOGFILE CMD...: runs CMD as rank RANK inside host HOST,
# in the background, stdout+stderr to LOGFILE. `ip netns exec` and `env` exec
# the command, so the recorded pid is the command's own.
netns_spawn() {
  local host="$1" rank="$2" log="$3"; shift 3
  ip netns exec "$(netns_host "$host")" env RANK="$rank" "$@" > "$log" 2>&1 &
  NETNS_PIDS+=("$!")
  NETNS_PID_NAMES+=("rank $rank on host $host ($log)")
}

# netns_wait [TIMEOUT_S]: waits for every spawned rank. When one fails (or the
# timeout passes) the others are sent SIGTERM, then SIGKILL. Returns 0 when all
# exited 0. Clears the pid list.
netns_wait() {
  local timeout="${1:-600}" deadline=$((SECONDS + ${1:-600})) failed=0 i alive
  while :; do
    alive=0
    for i in "${!NETNS_PIDS[@]}"; do
      local p="${NETNS_PIDS[$i]}"
      [ -z "$p" ] && continue
      if kill -0 "$p" 2>/dev/null; then alive=1; continue; fi
      wait "$p"; local rc=$?
      NETNS_PIDS[$i]=""
      if [ "$rc" -ne 0 ]; then
        echo "    ${NETNS_PID_NAMES[$i]} exited with status $rc" >&2
        failed=1
      fi
    done
    [ "$alive" -eq 0 ] && break
    if [ "$failed" -ne 0 ] || [ "$SECONDS" -ge "$deadline" ]; then
      [ "$failed" -eq 0 ] && { echo "    timeout after ${timeout}s, stopping the ranks" >&2; failed=1; }
      netns_kill_ranks
      break
    fi
    sleep 0.2
  done
  NETNS_PIDS=(); NETNS_PID_NAMES=()
  return "$failed"
}

# Stops the ranks this shell spawned (by pid only).
netns_kill_ranks() {
  local p
  for p in "${NETNS_PIDS[@]:-}"; do [ -n "$p" ] && kill -TERM "$p" 2>/dev/null; done
  sleep 2
  for p in "${NETNS_PIDS[@]:-}"; do [ -n "$p" ] && kill -KILL "$p" 2>/dev/null; done
  for p in "${NETNS_PIDS[@]:-}"; do [ -n "$p" ] && wait "$p" 2>/dev/null; done
  NETNS_PIDS=(); NETNS_PID_NAMES=()
}

# For `trap netns_cleanup EXIT`: stops our ranks, then deletes the namespaces.
netns_cleanup() {
  netns_kill_ranks
  netns_down quiet
}

# ---- command-line use ------------------------------------------------------
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  set -uo pipefail
  cmd="${1:-}"; shift || true
  case "$cmd" in
    up)
      n="${1:?usage: netns.sh up N [--rate R] [--rate-of K=R] [--delay D] [--mtu M]}"; shift
      rate="" delay="" mtu=1500; NETNS_RATE_OF=()
      while [ $# -gt 0 ]; do
        case "$1" in
          --rate) rate="$2"; shift 2 ;;
          --rate-of) NETNS_RATE_OF+=("$2"); shift 2 ;;
          --delay) delay="$2"; shift 2 ;;
          --mtu) mtu="$2"; shift 2 ;;
          *) echo "unknown option $1" >&2; exit 2 ;;
        esac
      done
      netns_up "$n" "$rate" "$delay" "$mtu" || { netns_down quiet; exit 1; }
      netns_status ;;
    down) netns_down ;;
    status) netns_status ;;
    check) netns_check "${1:-0}" "${2:-1}" "${3:-3}" ;;
    exec) k="$1"; shift; exec ip netns exec "$(netns_host "$k")" "$@" ;;
    *) sed -n '2,33p' "$0"; exit 2 ;;
  esac
fi
