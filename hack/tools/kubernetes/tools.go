//go:build tools

// Package tools pins the Kubernetes commands built from this wrapper module:
// the control plane the e2e suite and the sandbox run (kube-apiserver,
// kubectl), and the components of the real cluster of `make test-k8s-e2e`
// (kube-controller-manager, kube-scheduler, and each node's kubelet and
// kube-proxy).
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
