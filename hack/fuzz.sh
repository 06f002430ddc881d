#!/usr/bin/env bash
# Runs every Go fuzz target in the module for a short time each.
# Usage: hack/fuzz.sh [duration]   (default 10s per target)
set -euo pipefail
t=${1:-10s}
cd "$(dirname "$0")/.."
go list -f '{{.Dir}}' ./... | while read -r dir; do
  grep -hoE '^func (Fuzz[A-Za-z0-9_]+)' "$dir"/*_test.go 2>/dev/null | awk '{print $2}' | while read -r f; do
    echo "== $dir $f ($t)"
    (cd "$dir" && go test -run '^$' -fuzz "^${f}\$" -fuzztime "$t" .)
  done
done
