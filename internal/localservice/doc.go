// Package localservice keeps the dedicated backend pools of
// ExternalTrafficPolicy=Local Services current, in multiple Standard load
// balancer mode. User documentation (retry behaviour, error classes,
// events, recovery): docs/multiple-load-balancers.md, section
// "ExternalTrafficPolicy=Local services".
//
// Contract:
//
//   - Pools. A Local Service owns the pool <namespace>-<name> (and
//     <namespace>-<name>-IPv6) on its load balancer. The provider creates
//     and deletes these pools, fills them when it reconciles the Service,
//     and tells the Updater where they are through provider.LocalServices
//     (Register, Unregister, always under the service-reconcile lock). The
//     Updater writes only those pools, never the cluster pool. Entries have
//     the provider's shape: name = node name, ipAddress = the node's first
//     InternalIP of the pool's family, the virtual network, and the admin
//     state adminstate.DesiredState(node), so the provider, the admin-state
//     controller and the Updater never undo each other.
//   - Desired state, not diffs. Every EndpointSlice event of a registered
//     Service queues the Service's full desired node set (the nodes running
//     its ready endpoints, from all its slices) for each of its pools. The
//     queue holds at most one entry per (Service, load balancer, pool); see
//     the queue type for the exact merge rule. Each tick
//     (loadBalancerBackendPoolUpdateIntervalInSeconds, default 30 s) GETs
//     every queued pool once, computes the difference to the desired
//     entries and PUTs the pool with its etag only when something differs:
//     at most one GET and one PUT per pool per tick, whatever the number of
//     endpoint changes, and a failed or dropped write is repaired by the
//     next change of the Service.
//   - Retry (docs and design local-service-updater-retry): each entry has a
//     retry count and a not-before time. Stale errors (not-found) drop the
//     entry quietly; throttling (429 through either throttle path, with its
//     Retry-After), 409 and 412 requeue it while
//     loadBalancerBackendPoolUpdateMaxRetries (default 3; 0 disables) lasts;
//     statuses the Azure SDK already retried and every other error are
//     terminal. A group (one pool) with a parked entry waits as a whole,
//     without ARM calls, events or metrics.
//   - Events, on the Service, once per distinct Service of a pool per
//     attempt: LoadBalancerBackendPoolUpdated, ...UpdateRetrying,
//     ...UpdateFailed (constants in consts.go). The operation metric
//     (request loadbalancer_backendpool_local_update) records terminal
//     outcomes only.
//   - Locks: a tick holds the service-reconcile lock (caller
//     LocalServiceBackendPoolUpdater) from start to end, and the Updater's
//     own mutex only to drain and to requeue, so EndpointSlice handlers are
//     never blocked by ARM calls. Order: service-reconcile lock, then the
//     Updater mutex. There is no distributed lease: azlb runs under leader
//     election.
//   - Shutdown: when Run's context ends, queued and parked entries are
//     dropped without events.
//   - Time comes from an injected k8s.io/utils/clock.
package localservice
