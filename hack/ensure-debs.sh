#!/usr/bin/env bash
# Installs the Debian packages that provide commands the tests and the
# README's walkthroughs run, when a command is missing:
#
#   hack/ensure-debs.sh nc:netcat-openbsd curl:curl python3:python3
#
# Each argument is COMMAND:PACKAGE. Nothing is installed when every command
# is there. It needs root (or sudo without a prompt) and apt-get; it exits 1
# naming the packages when it cannot install them.
set -euo pipefail

missing=()
for pair in "$@"; do
  cmd=${pair%%:*}
  pkg=${pair#*:}
  if [ -z "$cmd" ] || [ -z "$pkg" ] || [ "$cmd" = "$pair" ]; then
    echo "hack/ensure-debs.sh: $pair is not COMMAND:PACKAGE" >&2
    exit 2
  fi
  command -v "$cmd" >/dev/null 2>&1 || missing+=("$pkg")
done
[ ${#missing[@]} -eq 0 ] && exit 0

as_root() {
  if [ "$(id -u)" = 0 ]; then
    "$@"
  elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
    sudo -n "$@"
  else
    echo "hack/ensure-debs.sh: installing ${missing[*]} needs root; as root run: apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
}
if ! command -v apt-get >/dev/null; then
  echo "hack/ensure-debs.sh: no apt-get; install ${missing[*]} (Debian package names) by other means" >&2
  exit 1
fi
echo "hack/ensure-debs.sh: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
if ! as_root apt-get install -y --no-install-recommends "${missing[@]}" >/dev/null 2>&1; then
  as_root apt-get update -qq >/dev/null
  as_root apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
