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
//   - Manager applies admin states. It does not import the provider: it uses
//     a Backend (pool resolution, load balancer cache invalidation, the ARM
//     backend pool client) and a Locker (the service-reconcile lock), both
//     implemented by the provider. One apply takes the lock once (caller
//     "AdminStateController"), resolves every pool holding the addresses on
//     every managed load balancer, GETs each pool afresh, and PUTs a pool
//     only when an entry's state changes. Entries are matched by IP address;
//     other entries are left as they are. All pools are written in parallel:
//     a load balancer's only changed pool with If-Match, several changed
//     pools of one load balancer (they share its etag) without, relying on
//     the lock; a 412 or 409 is retried once, after the round, with a fresh
//     GET and If-Match. Any number of nodes cost one GET and at most one PUT
//     per pool. Each apply is one operation metric (request
//     "loadbalancer_adminstate_update"). A per-node-UID memory of the last
//     successful state makes repeats free; a new Manager verifies with GETs.
//   - Controller watches nodes and PreemptScheduled events. Its admin-state
//     queue (keyed by node name, default workqueue rate limiter) has one
//     worker that applies every pending node in one Manager call; failures
//     record a Warning event (LoadBalancerAdminStateUpdateFailed) and are
//     retried with exponential backoff (not before a throttle's
//     Retry-After); success records LoadBalancerAdminStateDown or
//     LoadBalancerAdminStateNone on the node when its reported state changes.
//     State is keyed by node UID, so a replacement node never inherits Down;
//     a deleted node costs no Azure call. Every node seen (initial list and
//     new nodes) is verified once, which costs GETs only when nothing is
//     wrong.
//   - A PreemptScheduled event about a node adds the spot-eviction taint
//     (NoSchedule) once, through a second queue. Events from the informer's
//     initial list (they predate the controller), older than
//     PreemptEventMaxAge, older than the node, about another node UID, or
//     not newer than one already acted on for the node are ignored, as are
//     all while the taint is present. So a restart never re-taints a node an
//     operator has cleared.
//   - Time comes from an injected k8s.io/utils/clock; goroutines end when
//     Run's context ends.
//
// Operator documentation: docs/admin-state.md.
package adminstate
