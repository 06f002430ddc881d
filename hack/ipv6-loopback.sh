#!/usr/bin/env bash
# Routes the IPv6 prefix of the emulator's data plane, fd00:10::/32
# (devenv.LoopbackIPv6CIDR), to the loopback device as a local route: every
# address in it is then this machine's own, as every address of 127.0.0.0/8
# is, and internal IPv6 frontends and the nodes' IPv6 addresses can carry
# traffic on loopback (docs/data-plane.md, "IPv6"). It runs
#
#   ip -6 route add local fd00:10::/32 dev lo table local
#
# `make test-e2e` runs it (the dual-stack e2e test fails without it) and so
# does `make sandbox`. It is idempotent, changes nothing else (no sysctl),
# and needs root or CAP_NET_ADMIN (`sudo -n` is tried otherwise). It exits 1
# saying why when it cannot: IPv6 disabled, no `ip` (iproute2), no
# privilege, or the prefix already in use by a real network of this machine.
# The route lasts until reboot (or --remove).
#
#   hack/ipv6-loopback.sh           # add the route unless it is there
#   hack/ipv6-loopback.sh --check   # exit 0 when it is there, 1 otherwise
#   hack/ipv6-loopback.sh --remove  # take it away
set -euo pipefail
prefix=fd00:10::/32
probe=fd00:10::1 # an address of the prefix

fail() {
  echo "hack/ipv6-loopback.sh: $*" >&2
  exit 1
}

command -v ip >/dev/null || fail "the ip command (iproute2) is missing"
if [ ! -e /proc/net/if_inet6 ] || [ "$(cat /proc/sys/net/ipv6/conf/lo/disable_ipv6 2>/dev/null || echo 1)" = 1 ]; then
  fail "IPv6 is disabled on this machine (net.ipv6.conf.lo.disable_ipv6): enable it to route $prefix to loopback"
fi

# present: the local route on lo is there.
present() { [ -n "$(ip -6 route show table local type local exact "$prefix" dev lo 2>/dev/null)" ]; }

# as_root runs a command as root: directly, or through sudo without a prompt.
as_root() {
  if [ "$(id -u)" = 0 ]; then
    "$@"
  elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
    sudo -n "$@"
  else
    "$@" # CAP_NET_ADMIN without root, or a clear error from ip
  fi
}

case "${1:-}" in
--check)
  present && exit 0
  fail "$prefix is not routed to the loopback device; run hack/ipv6-loopback.sh as root"
  ;;
--remove)
  if present; then
    as_root ip -6 route del local "$prefix" dev lo table local
  fi
  exit 0
  ;;
"") ;;
*) fail "unknown argument $1 (want nothing, --check or --remove)" ;;
esac

present && exit 0

# Refuse a prefix this machine really uses: a local route would cut it off.
if ip -6 -o addr show | awk '$2 != "lo" {print $4}' | grep -qiE '^fd00:(0{0,2})10(:|/)'; then
  fail "an interface of this machine has an address in $prefix; not routing it to loopback"
fi
elsewhere=$(ip -6 route show table all root "$prefix" 2>/dev/null | grep -v ' dev lo ' || true)
if [ -n "$elsewhere" ]; then
  fail "this machine already routes (part of) $prefix elsewhere than loopback: $(head -1 <<<"$elsewhere")"
fi

if ! out=$(as_root ip -6 route add local "$prefix" dev lo table local 2>&1); then
  fail "cannot add the route ($out); as root run: ip -6 route add local $prefix dev lo table local"
fi
ip -6 route get "$probe" 2>/dev/null | grep -q '^local ' || fail "added the route, yet $probe is not local: $(ip -6 route get "$probe" 2>&1)"
echo "hack/ipv6-loopback.sh: $prefix is routed to the loopback device" >&2
