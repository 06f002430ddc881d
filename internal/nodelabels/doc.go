// Package nodelabels acts on node label changes that the service
// controller's node sync ignores. The cloud-provider framework resyncs load
// balancer hosts only when the set of nodes changes (a node joins or
// leaves, its exclusion label or providerID changes), yet a node's labels
// also decide which load balancer's cluster pool holds it (a
// configuration's nodeSelector, its agent pool, the primaryVMSet rule; see
// docs/multiple-load-balancers.md) and whether it belongs in any pool at
// all (control-plane labels). Without this controller such a node would
// stay where it was until the next node-set change.
//
// Contract:
//
//   - The Controller watches nodes through the shared informer. An update
//     whose labels differ from the previous version (or whose node was
//     replaced: another UID) enqueues the one key SyncKey; additions,
//     deletions, status heartbeats and resyncs enqueue nothing (the service
//     controller handles additions and deletions). A burst of relabels is
//     one sync.
//   - sync calls Syncer.SyncClusterPools, which brings every load
//     balancer's cluster pools in line with the nodes as the lister holds
//     them; the controller itself reads and writes nothing in Azure (the
//     provider writes through internal/lbstore). A failed sync is retried
//     with the queue's exponential per-item backoff.
//   - The controller manager runs it with the service controller
//     (service-lb-controller), sharing its identity, and only when nodes go
//     into pools (not with pod-based load balancing).
//
// Operator documentation: docs/multiple-load-balancers.md (node placement).
package nodelabels
