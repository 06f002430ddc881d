// Package localservice keeps the dedicated backend pools of
// ExternalTrafficPolicy=Local Services current, in multiple Standard load
// balancer mode. User documentation (retry behaviour, error classes,
// events, recovery): docs/multiple-load-balancers.md, section
// "ExternalTrafficPolicy=Local services".
//
// Contract:
//
//   - Pools. A Local Service owns the pool names.LocalServicePool
//     ("<namespace>.<name>", and "<namespace>.<name>.IPv6") on the load
//     balancer the Service reconcile placed it on; the Service reconcile
//     creates, fills and deletes it. The Updater writes only those pools,
//     never the cluster pool, and finds where a pool is through the store
//     (lbstore.Store.FindPool), so an entry follows its Service when it
//     moves. Entries have the one pool-entry shape (backendpool.Policy): name
//     = node name, ipAddress = the node's first InternalIP of the pool's
//     family, the virtual network, and the admin state the node's taints
//     call for, so the Service reconcile, the admin-state controller and the
//     Updater never undo each other.
//   - Desired state, not diffs. Every EndpointSlice event of a Local
//     LoadBalancer Service of the class azlb serves (Options.Class; the
//     pools of other Services are not azlb's) queues the Service's full
//     desired node set (from all its slices) for the pool of each of its IP
//     families.
//   - Serving and terminating endpoints (KEP-1672; docs/admin-state.md,
//     "Rolling updates"). A node running a ready endpoint is a member
//     (None, or Down when its taints call for it). A node whose endpoints
//     of the Service are all terminating but still serving stays a member
//     with AdminState Down (no new flows; established ones go on) and
//     leaves when they are gone or stop serving; when the Service has no
//     ready endpoint at all, such nodes stay None and take traffic. A
//     terminating endpoint counts as serving only when its serving
//     condition is explicitly true. With enableLoadBalancerAdminState off
//     no Down is written: a draining node leaves instead. The rule is
//     backendpool's (LocalEndpointsOf, Policy.LocalMembers), shared with
//     the Service reconcile and the admin-state controller. The queue holds at most one entry per
//     (Service, pool); see the queue type for the exact merge rule. Each
//     tick (loadBalancerBackendPoolUpdateIntervalInSeconds, default 30 s)
//     drops the entries whose Service is gone or no longer Local, or whose
//     pool is on no managed load balancer, and has the store apply the rest
//     in one round: it GETs every queued pool once, the Updater computes the
//     difference to the desired entries, and the store PUTs the pool with
//     its etag only when something differs: at most one GET and one PUT per
//     pool per tick (conflict retries aside), whatever the number of
//     endpoint changes.
//   - Retry (docs/multiple-load-balancers.md): each pool has a
//     retry count and a not-before time. Stale errors (not-found) drop the
//     entry quietly; throttling (429 through either throttle path, with its
//     Retry-After), 409 and 412 requeue it while
//     loadBalancerBackendPoolUpdateMaxRetries (default 3; 0 disables) lasts;
//     statuses the Azure SDK already retried and every other error are
//     terminal. The store has already retried a 409 or 412 with a fresh read
//     (lbstore.MaxConflictRetries times) before the Updater sees it. A group
//     (one pool) with a parked entry waits as a whole, without ARM calls,
//     events or metrics. A fresh change merged into an entry keeps its own
//     budget: when the entry's oldest attempt runs out of retries it is
//     reported and dropped, and the fresh change lives on.
//   - Events, on the Service, once per distinct Service of a pool per
//     attempt: LoadBalancerBackendPoolUpdated, ...UpdateRetrying,
//     ...UpdateFailed (constants in consts.go). The operation metric
//     (request loadbalancer_backendpool_local_update) records terminal
//     outcomes only.
//   - Locks: the Updater's own mutex guards the queue only (drain and
//     requeue), so EndpointSlice handlers are never blocked by ARM calls.
//     There is no service-reconcile lock: the store is the only writer, and
//     every writer computes a pool's entries from the same desired state.
//   - Shutdown: when Run's context ends, queued and parked entries are
//     dropped without events.
//   - Time comes from an injected k8s.io/utils/clock.
package localservice
