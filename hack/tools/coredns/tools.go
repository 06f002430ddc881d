//go:build tools

// Package tools pins CoreDNS, the cluster DNS of `make test-k8s-e2e`'s real
// cluster (run with the kubernetes plugin and no forwarder: no query leaves
// the machine).
package tools

import _ "github.com/coredns/coredns"
