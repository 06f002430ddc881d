// Package provider implements cloudprovider.LoadBalancer (and the
// cloudprovider.Interface registered as "azure"): the Service reconcile that
// gives each LoadBalancer Service frontends, rules and probes on an Azure
// Standard load balancer, and keeps the load balancer's node pools in line
// with the cluster's nodes.
//
// Contract:
//
//   - Every load balancer and pool read or write goes through the
//     lbstore.Store given in Options (no ARM load balancer client is used
//     here). Public IPs, which each Service owns alone, are read and written
//     directly.
//   - EnsureLoadBalancer places the Service (multiple-SLB placement, or the
//     default load balancer and its internal twin), removes its frontends
//     from every other managed load balancer (also one whose configuration
//     was removed), then writes its frontends, rules and probes in one store
//     mutation and fills the pool its rules use: the cluster pool of the
//     load balancer's nodes, or, for an ExternalTrafficPolicy=Local Service
//     in multiple-SLB mode, its dedicated pool with the nodes running its
//     ready endpoints. An internal Service that moves keeps its private
//     address (carried over as a static one); a public one keeps its public
//     IP. A dedicated pool named the legacy way (<namespace>-<name>) is
//     replaced by the collision-free one, starting with its entries. A pool
//     is dropped only when no rule references it.
//   - UpdateLoadBalancer brings the Service's pool in line with the nodes;
//     an unchanged node set costs no ARM call (the store checks its cache).
//   - Pool entries follow backendpool.Policy, with taints read from the node
//     lister at write time, so a pool rewrite never puts None back over a
//     Down the admin-state controller set.
//   - Reconciles of one Service are serialised; different Services run
//     concurrently (--concurrent-service-syncs) and share store rounds.
//   - Bad annotations are Warning events (InvalidLoadBalancerAnnotation)
//     and errors; nothing is written for such a Service.
//
// Operator documentation: docs/load-balancers.md and
// docs/multiple-load-balancers.md.
package provider
