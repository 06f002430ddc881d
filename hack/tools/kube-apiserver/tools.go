//go:build tools

// Package tools pins the kube-apiserver command in this wrapper module.
package tools

import _ "k8s.io/kubernetes/cmd/kube-apiserver"
