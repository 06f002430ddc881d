// Package k8se2e runs the Kubernetes project's own end-to-end specs
// (e2e.test v1.37.1) for LoadBalancer Services against azlb: a real
// cluster on this machine (internal/localcluster: kube-apiserver, etcd,
// kube-controller-manager, kube-scheduler, CoreDNS, three nodes with
// containerd, kubelet and kube-proxy), azlb-controller-manager as its cloud
// controller manager (the binary, with the Helm chart's arguments and
// identities), and azlb-emulator whose data plane carries the traffic to
// the nodes as Azure's load balancer does.
//
// Run it with `make test-k8s-e2e` (root; it installs the Debian packages
// and builds what it needs). docs/kubernetes-e2e.md lists the specs, the
// flags and why a spec may be skipped.
package k8se2e

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
