#!/usr/bin/env bash
# Runs every Go fuzz target in the module for a short time each.
# Usage: hack/fuzz.sh [duration]   (default 10s per target)
set -euo pipefail
t=${1:-10s}
cd "$(dirname "$0")/.."
shopt -s nullglob
for dir in $(go list -f '{{.Dir}}' ./...); do
  files=("$dir"/*_test.go)
  [ "${#files[@]}" -gt 0 ] || continue
  for f in $(grep -hoE '^func Fuzz[A-Za-z0-9_]+' "${files[@]}" | awk '{print $2}' || true); do
    echo "== $dir $f ($t)"
    (cd "$dir" && go test -run '^$' -fuzz "^${f}\$" -fuzztime "$t" .)
  done
done
