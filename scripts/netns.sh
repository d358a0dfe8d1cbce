#!/usr/bin/env bash
# Emulated hosts on this machine: N network namespaces joined by a bridge,
# each behind its own veth link, optionally rate-limited with tc's token
# bucket filter (tbf; this kernel has no netem). Ranks started in them talk
# over real TCP on a real, rate-limited link -- a host boundary in
# miniature. Needs root (CAP_NET_ADMIN) and iproute2.
#
#   scripts/netns.sh up N [RATE]     create hosts 0..N-1 (RATE: tc syntax,
#                                    e.g. 200mbit, 1gbit; none: unlimited)
#   scripts/netns.sh run N -- CMD..  run CMD as N ranks, rank i in host i,
#                                    with MASTER_ADDR (host 0), MASTER_PORT,
#                                    RANK, WORLD_SIZE, LOCAL_RANK,
#                                    LOCAL_WORLD_SIZE set (torchrun's
#                                    variables, as varuna-run expects;
#                                    LOCAL_RANK=i and LOCAL_WORLD_SIZE=N,
#                                    not torchrun's 0 and 1 per host: the
#                                    "hosts" share this machine's cores,
#                                    which varuna-run divides by
#                                    LOCAL_WORLD_SIZE); one rank per host
#                                    (several per host: start them by hand
#                                    with `exec`); exits with the first
#                                    non-zero status
#   scripts/netns.sh exec I -- CMD.. run CMD in host I
#   scripts/netns.sh addr I          print host I's address
#   scripts/netns.sh down N          remove them (also what `up` does first)
#
# Names: namespaces ${VARUNA_NETNS:-varuna}0.., bridge ${VARUNA_NETNS}br,
# addresses 10.${VARUNA_NETNS_NET:-87}.0.(i+1)/24. MASTER_PORT: $MASTER_PORT
# or 29650. Each namespace has its loopback up, so a rank can also reach
# itself. The link of host i limits what host i sends (its egress).
set -euo pipefail

P=${VARUNA_NETNS:-varuna}
NET=${VARUNA_NETNS_NET:-87}
BR=${P}br

die() { echo "netns.sh: error: $*" >&2; exit 1; }
need_n() { [[ ${1:-} =~ ^[1-9][0-9]*$ ]] || die "expected a host count, got '${1:-}'"; }
addr() { echo "10.$NET.0.$(($1 + 1))"; }

down() {
  local n=$1
  for ((i = 0; i < n; i++)); do
    ip netns del "$P$i" 2>/dev/null || true
    ip link del "${P}h$i" 2>/dev/null || true
  done
  ip link del "$BR" 2>/dev/null || true
}

up() {
  local n=$1 rate=${2:-}
  [[ $(id -u) -eq 0 ]] || die "creating network namespaces needs root"
  command -v ip >/dev/null && command -v tc >/dev/null ||
    die "needs iproute2 (ip, tc)"
  down "$n"
  ip link add "$BR" type bridge || die "cannot create the bridge $BR"
  ip link set "$BR" up
  for ((i = 0; i < n; i++)); do
    ip netns add "$P$i"
    ip link add "${P}h$i" type veth peer name eth0 netns "$P$i"
    ip link set "${P}h$i" master "$BR" up
    ip -n "$P$i" addr add "$(addr "$i")/24" dev eth0
    ip -n "$P$i" link set eth0 up
    ip -n "$P$i" link set lo up
    if [[ -n $rate ]]; then
      # burst: at least rate / HZ; 64 KiB covers up to a few Gbit/s.
      # (Refused: what was built so far is removed, not left half-made.)
      tc -n "$P$i" qdisc add dev eth0 root tbf rate "$rate" burst 64kb \
        latency 100ms || { down "$n"; die "tc rejected the rate '$rate'"; }
    fi
  done
}

run() {
  local n=$1
  shift
  [[ ${1:-} == -- ]] && shift
  (($#)) || die "run: no command"
  local port=${MASTER_PORT:-29650} pids=() status=0
  for ((i = 0; i < n; i++)); do
    # (c10d warns "The hostname of the client socket cannot be retrieved":
    # the namespaces have no DNS; harmless.)
    ip netns exec "$P$i" env MASTER_ADDR="$(addr 0)" MASTER_PORT="$port" \
      RANK="$i" WORLD_SIZE="$n" LOCAL_RANK="$i" LOCAL_WORLD_SIZE="$n" "$@" &
    pids+=($!)
  done
  for p in "${pids[@]}"; do
    wait "$p" || { s=$?; ((status)) || status=$s; }
  done
  return "$status"
}

cmd=${1:-}
shift || true
case $cmd in
  up) need_n "${1:-}"; up "$1" "${2:-}" ;;
  down) need_n "${1:-}"; down "$1" ;;
  run) need_n "${1:-}"; run "$@" ;;
  exec)
    [[ ${1:-} =~ ^[0-9]+$ ]] || die "exec: expected a host index"
    i=$1; shift; [[ ${1:-} == -- ]] && shift
    exec ip netns exec "$P$i" "$@" ;;
  addr) [[ ${1:-} =~ ^[0-9]+$ ]] || die "addr: expected a host index"; addr "$1" ;;
  *) die "usage: netns.sh up N [RATE] | run N -- CMD... | exec I -- CMD... | addr I | down N" ;;
esac
