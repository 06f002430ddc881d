// Package nodeagent simulates, for the sandbox and the end-to-end tests,
// what runs on a Kubernetes node: its Proxy is the kube-proxy part, serving
// the node's share of every Service on the node's loopback address for the
// emulator's data plane.
package nodeagent
