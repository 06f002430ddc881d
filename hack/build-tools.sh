#!/usr/bin/env bash
# Builds the Kubernetes binaries the e2e suite and the sandbox run, from the Go
# module proxy, into bin/ (git-ignored). A binary is rebuilt only when its
# wrapper module under hack/tools/ changes. The first kube-apiserver build
# takes several minutes; later runs return at once.
#
#   hack/build-tools.sh                    # kube-apiserver and kubectl v1.37.1, and etcd
#   hack/build-tools.sh kube-apiserver etcd # only those
#   hack/build-tools.sh golangci-lint      # the linter `make lint` runs
#   hack/build-tools.sh helm               # helm, for the chart tests and deploy/rbac.yaml
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin="$root/bin"
mkdir -p "$bin"

# build NAME WRAPPER_DIR PACKAGE LDFLAGS
build() {
  local name=$1 dir=$2 pkg=$3 ldflags=$4
  local stamp="$bin/.$name.stamp" want
  want=$(cat "$dir/go.mod" "$dir/go.sum" | sha256sum | cut -c1-16)
  if [ -x "$bin/$name" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
    return 0
  fi
  echo "building $name from $(basename "$dir") (cached in bin/ afterwards)..." >&2
  (cd "$dir" && go build -mod=mod -ldflags "$ldflags" -o "$bin/$name.tmp" "$pkg")
  mv "$bin/$name.tmp" "$bin/$name"
  echo "$want" >"$stamp"
}

# helm_version is the helm version its wrapper module pins (for `helm version`).
helm_version() { awk '$1 == "require" && $2 == "helm.sh/helm/v4" {print $3}' "$root/hack/tools/helm/go.mod"; }

kv=v1.37.1
version="-s -w -X k8s.io/component-base/version.gitVersion=$kv -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=37 -X k8s.io/component-base/version.gitTreeState=clean"
for tool in "${@:-kube-apiserver kubectl etcd}"; do
  for t in $tool; do
    case "$t" in
      kube-apiserver) build kube-apiserver "$root/hack/tools/kubernetes" k8s.io/kubernetes/cmd/kube-apiserver "$version" ;;
      kubectl) build kubectl "$root/hack/tools/kubernetes" k8s.io/kubernetes/cmd/kubectl "$version" ;;
      etcd) build etcd "$root/hack/tools/etcd" go.etcd.io/etcd/server/v3 "-s -w" ;;
      golangci-lint) build golangci-lint "$root/hack/tools/golangci-lint" github.com/golangci/golangci-lint/v2/cmd/golangci-lint "-s -w" ;;
      helm) build helm "$root/hack/tools/helm" helm.sh/helm/v4/cmd/helm "-s -w -X helm.sh/helm/v4/internal/version.version=$(helm_version)" ;;
      *) echo "unknown tool $t (kube-apiserver, kubectl, etcd, golangci-lint, helm)" >&2; exit 2 ;;
    esac
  done
done
