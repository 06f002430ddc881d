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
#   hack/build-tools.sh cluster            # what `make test-k8s-e2e` runs (docs/kubernetes-e2e.md):
#                                          # the control plane, kube-controller-manager, kube-scheduler,
#                                          # kubelet, kube-proxy, coredns, e2e.test, ginkgo and the test images
#
# Names of one wrapper module are built by one `go build` (its packages
# compile in parallel); with several names the groups build one after the
# other, each using every core.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin="$root/bin"
mkdir -p "$bin"

# stamp_of DIR: what a binary built from the wrapper module DIR is stamped
# with (its go.mod and go.sum).
stamp_of() { cat "$1/go.mod" "$1/go.sum" | sha256sum | cut -c1-16; }

# fresh NAME DIR: bin/NAME exists and was built from DIR as it is now.
fresh() { [ -x "$bin/$1" ] && [ "$(cat "$bin/.$1.stamp" 2>/dev/null)" = "$(stamp_of "$2")" ]; }

# build_group DIR LDFLAGS PACKAGE...: the binaries of those packages (named
# after the package's last element) from the wrapper module DIR, one `go build`.
build_group() {
  local dir=$1 ldflags=$2 want p n todo=()
  shift 2
  want=$(stamp_of "$dir")
  for p in "$@"; do
    fresh "${p##*/}" "$dir" || todo+=("$p")
  done
  [ ${#todo[@]} -gt 0 ] || return 0
  echo "building ${todo[*]##*/} from $(basename "$dir") (cached in bin/ afterwards)..." >&2
  local out
  out=$(mktemp -d "$bin/.build.XXXXXX")
  trap 'rm -rf "$out"' RETURN
  (cd "$dir" && go build -mod=mod -ldflags "$ldflags" -o "$out/" "${todo[@]}")
  for p in "${todo[@]}"; do
    n=${p##*/}
    mv "$out/$n" "$bin/$n"
    echo "$want" >"$bin/.$n.stamp"
  done
}

# build NAME WRAPPER_DIR PACKAGE LDFLAGS: one binary named NAME.
build() {
  local name=$1 dir=$2 pkg=$3 ldflags=$4
  fresh "$name" "$dir" && return 0
  echo "building $name from $(basename "$dir") (cached in bin/ afterwards)..." >&2
  (cd "$dir" && go build -mod=mod -ldflags "$ldflags" -o "$bin/$name.tmp" "$pkg")
  mv "$bin/$name.tmp" "$bin/$name"
  stamp_of "$dir" >"$bin/.$name.stamp"
}

# build_test NAME WRAPPER_DIR PACKAGE LDFLAGS: the test binary of PACKAGE
# (`go test -c`), as Kubernetes builds e2e.test.
build_test() {
  local name=$1 dir=$2 pkg=$3 ldflags=$4
  fresh "$name" "$dir" && return 0
  echo "building $name from $(basename "$dir") (cached in bin/ afterwards)..." >&2
  (cd "$dir" && go test -c -mod=mod -ldflags "$ldflags" -o "$bin/$name.tmp" "$pkg")
  mv "$bin/$name.tmp" "$bin/$name"
  stamp_of "$dir" >"$bin/.$name.stamp"
}

# helm_version is the helm version its wrapper module pins (for `helm version`).
helm_version() { awk '$1 == "require" && $2 == "helm.sh/helm/v4" {print $3}' "$root/hack/tools/helm/go.mod"; }
coredns_version() { awk '$1 == "require" && $2 == "github.com/coredns/coredns" {print $3}' "$root/hack/tools/coredns/go.mod"; }

kv=v1.37.1
version="-s -w -X k8s.io/component-base/version.gitVersion=$kv -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=37 -X k8s.io/component-base/version.gitTreeState=clean"
k8s="$root/hack/tools/kubernetes"
for tool in "${@:-kube-apiserver kubectl etcd}"; do
  for t in $tool; do
    case "$t" in
      kube-apiserver) build kube-apiserver "$k8s" k8s.io/kubernetes/cmd/kube-apiserver "$version" ;;
      kubectl) build kubectl "$k8s" k8s.io/kubernetes/cmd/kubectl "$version" ;;
      etcd) build etcd "$root/hack/tools/etcd" go.etcd.io/etcd/server/v3 "-s -w" ;;
      golangci-lint) build golangci-lint "$root/hack/tools/golangci-lint" github.com/golangci/golangci-lint/v2/cmd/golangci-lint "-s -w" ;;
      helm) build helm "$root/hack/tools/helm" helm.sh/helm/v4/cmd/helm "-s -w -X helm.sh/helm/v4/internal/version.version=$(helm_version)" ;;
      kube-controller-manager | kube-scheduler | kubelet | kube-proxy | components)
        # The cluster's components build together: one go build, shared packages once.
        build_group "$k8s" "$version" k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kubectl \
          k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kube-scheduler \
          k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kube-proxy ;;
      coredns) build coredns "$root/hack/tools/coredns" github.com/coredns/coredns \
        "-s -w -X github.com/coredns/coredns/coremain.GitCommit=$(coredns_version)" ;;
      ginkgo) build ginkgo "$root/hack/tools/e2e" github.com/onsi/ginkgo/v2/ginkgo "-s -w" ;;
      e2e.test) build_test e2e.test "$root/hack/tools/e2e" k8s.io/kubernetes/test/e2e "$version" ;;
      # Built as the other Kubernetes binaries are (cgo on: their compiled
      # packages are reused); hack/test-images.sh puts the shared
      # libraries it loads into its image.
      agnhost) build agnhost "$root/hack/tools/e2e" k8s.io/kubernetes/test/images/agnhost "-s -w" ;;
      test-images) "$root/hack/build-tools.sh" agnhost && "$root/hack/test-images.sh" ;;
      cluster) "$root/hack/build-tools.sh" etcd components coredns e2e.test ginkgo test-images ;;
      *) echo "unknown tool $t (kube-apiserver, kubectl, etcd, golangci-lint, helm, kube-controller-manager, kube-scheduler, kubelet, kube-proxy, components, coredns, e2e.test, ginkgo, agnhost, test-images, cluster)" >&2; exit 2 ;;
    esac
  done
done
