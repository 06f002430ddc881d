#!/usr/bin/env bash
# Builds the images the Kubernetes e2e specs of `make test-k8s-e2e` run, as
# image archives under bin/images/ that each node's containerd imports: the
# nodes never pull (docs/kubernetes-e2e.md). Called by
# `hack/build-tools.sh test-images` once bin/agnhost is built; an archive is
# rebuilt when this script, bin/agnhost or the pause source is newer.
#
#   registry.k8s.io/pause:3.10.2                       pause.c of k8s.io/kubernetes v1.37.1, gcc -static
#   registry.k8s.io/e2e-test-images/agnhost:2.66.1     bin/agnhost (and the libraries it loads), and the tools the specs run in it
#   registry.k8s.io/e2e-test-images/busybox:1.37.0-2   the same tools, without agnhost
#
# The tools are the machine's own Debian binaries with the shared libraries
# ldd lists for them: /bin/sh is dash (as busybox's sh, it runs no builtin
# applets in place of /usr/bin ones), curl, GNU wget, netcat-openbsd (the
# specs' `nc -u`, `-t`, `-v`, `-z`) and coreutils. The real agnhost image is
# Alpine, whose busybox wget tries once: /etc/wgetrc says `tries = 1` so GNU
# wget does the same (it retries 20 times by default).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin="$root/bin"
out="$bin/images"
mkdir -p "$out"

kv=v1.37.1
pause_tag=3.10.2
agnhost_tag=2.66.1
busybox_tag=1.37.0-2
created=1700000000 # fixed: the same inputs give the same image digests

need() {
  local missing=()
  for c in "$@"; do type -P "$c" >/dev/null || missing+=("$c"); done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "test-images: missing ${missing[*]} (hack/node-packages.sh installs them)" >&2
    exit 1
  fi
}
need gcc ldd dash bash curl wget nc.openbsd seq sleep cat dd timeout grep sed ip

# stale OUT INPUT...: OUT is missing or older than an input.
stale() {
  local o=$1
  shift
  [ -s "$o" ] || return 0
  for i in "$@"; do [ "$i" -nt "$o" ] && return 0; done
  return 1
}

image_tool() { go -C "$root/hack/tools/image" run . "$@"; }

# copy_with_libs ROOTFS FILE [AS]: FILE at AS (default: its own path) in
# ROOTFS, and every shared library it loads at its path.
copy_with_libs() {
  local rootfs=$1 f=$2 as=${3:-$2} lib
  install -D -m 0755 "$f" "$rootfs$as"
  for lib in $(ldd "$f" 2>/dev/null | grep -oE '/[^ ]+' || true); do
    [ -e "$rootfs$lib" ] || install -D -m 0755 "$(readlink -f "$lib")" "$rootfs$lib"
  done
}

# tools_rootfs DIR: the shell and tools the specs run.
tools_rootfs() {
  local r=$1 t
  copy_with_libs "$r" "$(type -P dash)" /bin/sh
  copy_with_libs "$r" "$(type -P bash)" /bin/bash
  copy_with_libs "$r" "$(type -P nc.openbsd)" /usr/bin/nc
  for t in curl wget seq sleep cat dd timeout grep sed ip echo true false test ls env head tail tr wc sort \
    date mkdir rm cp mv id uname hostname touch printf kill; do
    type -P "$t" >/dev/null || continue
    copy_with_libs "$r" "$(readlink -f "$(type -P "$t")")" "/usr/bin/$t"
  done
  mkdir -p "$r/etc" "$r/tmp" "$r/root" "$r/var/run"
  chmod 1777 "$r/tmp"
  printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' >"$r/etc/passwd"
  printf 'root:x:0:\nnogroup:x:65534:\n' >"$r/etc/group"
  printf 'passwd: files\ngroup: files\nhosts: files dns\n' >"$r/etc/nsswitch.conf"
  printf 'tries = 1\n' >"$r/etc/wgetrc"
}

k8s_dir=$(cd "$root/hack/tools/e2e" && go list -mod=mod -m -f '{{.Dir}}' k8s.io/kubernetes)
pause_src="$k8s_dir/build/pause/linux/pause.c"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

if stale "$out/pause.tar" "$0" "$pause_src"; then
  echo "building image registry.k8s.io/pause:$pause_tag..." >&2
  mkdir -p "$work/pause"
  gcc -Os -static -DVERSION="$pause_tag" -o "$work/pause/pause" "$pause_src"
  strip "$work/pause/pause"
  image_tool archive --rootfs "$work/pause" --ref "registry.k8s.io/pause:$pause_tag" \
    --entrypoint /pause --created "$created" --out "$out/pause.tar" >/dev/null
fi

if stale "$out/agnhost.tar" "$0" "$bin/agnhost" || stale "$out/busybox.tar" "$0"; then
  echo "building images registry.k8s.io/e2e-test-images/agnhost:$agnhost_tag and busybox:$busybox_tag..." >&2
  tools_rootfs "$work/busybox"
  image_tool archive --rootfs "$work/busybox" --ref "registry.k8s.io/e2e-test-images/busybox:$busybox_tag" \
    --cmd /bin/sh --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --created "$created" --out "$out/busybox.tar" >/dev/null
  cp -a "$work/busybox" "$work/agnhost"
  copy_with_libs "$work/agnhost" "$bin/agnhost" /agnhost
  image_tool archive --rootfs "$work/agnhost" --ref "registry.k8s.io/e2e-test-images/agnhost:$agnhost_tag" \
    --entrypoint /agnhost --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --created "$created" --out "$out/agnhost.tar" >/dev/null
fi
echo "$kv test images in $out: $(cd "$out" && ls ./*.tar | tr '\n' ' ')" >&2
