// Package adminstate takes a node's backends out of Azure Load Balancer
// rotation the moment the node leaves service, by setting the backend
// address AdminState to Down, and restores None when it returns.
//
// Contract:
//
//   - Triggers are durable taints only (see the Taint* constants):
//     node.kubernetes.io/out-of-service, node.cloudprovider.kubernetes.io/shutdown
//     and cloudprovider.azure.microsoft.com/draining=spot-eviction. Cordoning
//     is ignored.
//   - DesiredState is pure and is shared with the Service reconcile path, so a
//     pool rewritten by EnsureLoadBalancer keeps a tainted node Down.
package adminstate
