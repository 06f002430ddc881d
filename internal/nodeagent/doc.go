// Package nodeagent simulates, for the sandbox and the end-to-end tests,
// what runs on a Kubernetes node whose VM lives in the ARM emulator. One
// Agent per node:
//
//   - registers the node as a kubelet does with an external cloud provider:
//     its InternalIP and Hostname addresses, its labels, no providerID, and
//     the node.cloudprovider.kubernetes.io/uninitialized taint the cloud
//     node controller removes once it has initialized the node;
//   - keeps the node's Ready condition in step with the VM's power state:
//     True while the VM runs, False (reason KubeletNotReady) otherwise, so
//     an ARM deallocate makes the node NotReady and a start makes it Ready
//     again, which is what the cloud node lifecycle controller acts on.
//
// The Agent is deliberately small: each simulated node component is one
// step of its loop (today the kubelet's status), so further components can
// join the same per-node loop. Time comes from an injected clock.
//
// Operator documentation: docs/node-lifecycle.md.
package nodeagent
