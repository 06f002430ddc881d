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
//     again, which is what the cloud node lifecycle controller acts on;
//   - with Service and EndpointSlice listers, is also the node's kube-proxy
//     for the emulator's data plane (Proxy): on the node's loopback addresses (IPv4, and IPv6 where routed to loopback)
//     it serves the node port (and, with floating IP, the Service port) of
//     every TCP and UDP Service port, answering with the node's name (an
//     HTTP answer on TCP, a reply datagram echoing the request on UDP:
//     UDPReply), resets (TCP) or drops (UDP) traffic kube-proxy would not
//     forward, and answers health check node ports from the node's ready
//     endpoints. While the VM is not running it serves nothing.
//
// A node without a VM (no providerID) is always running: the Agent then
// only runs its kube-proxy (the node was registered by whoever created it).
//
// The Agent is deliberately small: each simulated node component is one
// step of its loop, so further components can join the same per-node loop.
// Time comes from an injected clock.
//
// Operator documentation: docs/node-lifecycle.md, docs/data-plane.md.
package nodeagent
