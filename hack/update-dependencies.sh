#!/usr/bin/env bash
# Upgrades azlb's Go dependencies and the tool wrapper modules, then tidies
# and verifies every module and builds. Run it with `make update-dependencies`
# and review the go.mod/go.sum diffs (and the test run) before committing.
#
#   main module      every direct dependency to its latest release, except the
#                    Kubernetes libraries (k8s.io/api, client-go, ...), which
#                    move together to the latest patch of the minor go.mod has:
#                    a new Kubernetes minor is a deliberate change, made with the
#                    test cluster's kube-apiserver (hack/tools/kubernetes).
#                    Indirect dependencies follow (minimal version selection):
#                    `go get -u` would lift them past what the Kubernetes
#                    libraries are built with (kube-openapi, for one).
#                    A dependency whose latest release cannot be taken (it needs
#                    a newer Go, say) is kept, and the script says why.
#   hack/tools/kubernetes, hack/tools/e2e  left alone: the Kubernetes
#                    binaries, e2e.test and agnhost stay at the version the e2e
#                    suites are specified against (docs/kubernetes-e2e.md).
#   hack/tools/coredns  CoreDNS to the latest patch of its minor.
#   hack/tools/etcd  etcd to the latest patch of its minor (the one that
#                    Kubernetes minor is tested with).
#   hack/tools/golangci-lint, hack/tools/helm  the tool to its latest release
#                    (its own dependencies as it declares them).
#   hack/tools/image its direct dependencies to their latest releases
#                    (go-containerregistry, and x509roots/fallback: the CA roots
#                    in the images).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
export GOFLAGS=-mod=mod

step() { echo "== $*" >&2; }

# kube_minor prints vX.Y of k8s.io/api in go.mod.
kube_minor() { awk '$1 == "k8s.io/api" {print $2}' "$root/go.mod" | cut -d. -f1,2; }

tidy_verify() {
  (cd "$1" && go mod tidy && go mod verify >/dev/null)
}

# upgrade_direct DIR KUBE_MINOR: each direct requirement of DIR's go.mod to
# @latest (k8s.io staging libraries to @KUBE_MINOR, the latest patch of that
# minor), one at a time so that one refusal keeps only that module back.
upgrade_direct() {
  local dir=$1 minor=$2 m want out
  for m in $(cd "$dir" && go list -m -f '{{if and (not .Indirect) (not .Main)}}{{.Path}}{{end}}' all); do
    want=latest
    if [ -n "$minor" ] && [[ $m =~ ^k8s\.io/(api|apimachinery|client-go|cloud-provider|component-base|controller-manager|apiserver|component-helpers|kms)$ ]]; then
      want=$minor
    fi
    if ! out=$(cd "$dir" && go get "$m@$want" 2>&1); then
      echo "kept $m: $(echo "$out" | grep -v '^go: downloading' | sort -u | head -3)" >&2
    fi
  done
}

step "main module"
minor=$(kube_minor)
[ -n "$minor" ] || { echo "k8s.io/api not found in go.mod" >&2; exit 1; }
upgrade_direct "$root" "$minor"
tidy_verify "$root"

step "hack/tools/etcd"
etcd_minor=$(awk '$1 == "require" && $2 == "go.etcd.io/etcd/server/v3" {print $3}' "$root/hack/tools/etcd/go.mod" | cut -d. -f1,2)
(cd "$root/hack/tools/etcd" && go get "go.etcd.io/etcd/server/v3@$etcd_minor")
tidy_verify "$root/hack/tools/etcd"

step "hack/tools/golangci-lint"
(cd "$root/hack/tools/golangci-lint" && go get github.com/golangci/golangci-lint/v2@latest)
tidy_verify "$root/hack/tools/golangci-lint"

step "hack/tools/helm"
(cd "$root/hack/tools/helm" && go get helm.sh/helm/v4@latest)
tidy_verify "$root/hack/tools/helm"

step "hack/tools/image"
upgrade_direct "$root/hack/tools/image" ""
tidy_verify "$root/hack/tools/image"

step "hack/tools/coredns"
coredns_minor=$(awk '$1 == "require" && $2 == "github.com/coredns/coredns" {print $3}' "$root/hack/tools/coredns/go.mod" | cut -d. -f1,2)
(cd "$root/hack/tools/coredns" && go get "github.com/coredns/coredns@$coredns_minor")
tidy_verify "$root/hack/tools/coredns"

step "hack/tools/kubernetes, hack/tools/e2e (verify only: pinned)"
(cd "$root/hack/tools/kubernetes" && go mod verify >/dev/null)
(cd "$root/hack/tools/e2e" && go mod verify >/dev/null)

step "build"
(cd "$root" && go build ./... && go -C hack/tools/image build -o /dev/null .)
(cd "$root" && git diff --stat -- '*go.mod' '*go.sum' 2>/dev/null || true)
echo "dependencies updated: review the diff, then make test (tools rebuild when their go.mod changes)" >&2
