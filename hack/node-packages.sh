#!/usr/bin/env bash
# Installs the Debian packages the real cluster of `make test-k8s-e2e` needs
# (docs/kubernetes-e2e.md), when one is missing: apt-get, as root (sudo -n is
# tried). Nothing is started, configured or changed beyond installing them.
#
#   containerd, runc                each node's container runtime
#   containernetworking-plugins     the bridge, host-local, portmap and loopback CNI plugins
#   iptables, nftables, conntrack   what kube-proxy drives inside each node's network namespace
#   iproute2, util-linux            ip and nsenter, to build the nodes' network namespaces
#   gcc, libc6-dev                  the pause image, from its C source (hack/test-images.sh)
#   dash, curl, wget, netcat-openbsd, bash  the tools the e2e specs run inside the agnhost image
#
#   hack/node-packages.sh           install what is missing
#   hack/node-packages.sh --check   exit 1, naming them, if some are missing
set -euo pipefail
pkgs=(containerd runc containernetworking-plugins iptables nftables conntrack iproute2 util-linux
  gcc libc6-dev dash bash curl wget netcat-openbsd)

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f '${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "${1:-}" = --check ]; then
  echo "missing Debian packages: ${missing[*]} (hack/node-packages.sh installs them)" >&2
  exit 1
fi
if ! command -v apt-get >/dev/null; then
  echo "node-packages: apt-get not found; install ${missing[*]} by hand" >&2
  exit 1
fi
sudo=()
if [ "$(id -u)" != 0 ]; then
  command -v sudo >/dev/null && sudo -n true 2>/dev/null || {
    echo "node-packages: installing ${missing[*]} needs root" >&2
    exit 1
  }
  sudo=(sudo -n)
fi
echo "installing Debian packages: ${missing[*]}..." >&2
export DEBIAN_FRONTEND=noninteractive
# The package lists may be missing (a fresh image) or stale (a version gone).
"${sudo[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null ||
  { "${sudo[@]}" apt-get update -q >/dev/null && "${sudo[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null; }
