// Package adminstate takes a node's backends out of Azure Load Balancer
// rotation the moment the node leaves service, by setting the backend
// address AdminState to Down, and restores None when it returns.
//
// Contract:
//
//   - Triggers are durable taints only, as the pool-entry policy
//     (backendpool.Policy.OutOfServiceReasons) lists them: the built-in
//     node.kubernetes.io/out-of-service, node.cloudprovider.kubernetes.io/shutdown
//     and cloudprovider.azure.microsoft.com/draining=spot-eviction, and those
//     of loadBalancerAdminStateTaints (by default the cluster autoscaler's
//     ToBeDeletedByClusterAutoscaler and Karpenter's
//     karpenter.sh/disrupted:NoSchedule). Cordoning is ignored.
//   - The policy is pure and is shared with the Service reconcile path, so a
//     pool rewritten by EnsureLoadBalancer keeps a tainted node Down.
//   - Local Services' dedicated pools (ManagerOptions.LocalPools,
//     multiple-SLB mode): an entry of a node draining for the pool's
//     Service (its endpoints all terminating but serving, another node
//     ready: backendpool.Policy.LocalState) is set Down whatever the node's
//     taints say, so a taint's removal or the verification after a restart
//     never puts None back over the local service updater's Down. The
//     controller waits for the Service and EndpointSlice informers
//     (ManagerOptions.LocalPoolsSynced) before its first apply.
//   - Manager applies admin states through the lbstore.Store, the only
//     writer of pools (it imports no other controller). One apply resolves
//     the pools holding the addresses on every managed load balancer from
//     the store's coherent cache (lbstore.Store.PoolsWith), then has the
//     store read each such pool afresh, set the state of the matching
//     entries and write each changed pool once, all pools in parallel, with
//     the store's If-Match and conflict policy. Entries are matched by IP
//     address, and NIC-derived entries (NIC-based pools) by the owner of
//     their ip configuration (the node's scale set VM or network interface,
//     from ManagerOptions.Members); only their adminState changes, and
//     other entries are left as they are. A node whose members cannot be
//     resolved yet (its VM not listed) is retried. A node the pool-entry
//     policy puts in pools (Target.Pooled) that the cache places in none is
//     looked up again in Azure before the apply counts as done, so a stale
//     cache can never yield "Down on 0 pools" for a node in rotation. Any
//     number of nodes cost at most one PUT per pool; pools are written from
//     the store's cached load balancer with If-Match when it is current
//     (lbstore.PoolOptions.WriteFromCache: no GET for the one or two pools
//     of a load balancer), otherwise after one GET per pool. Each apply
//     is one operation metric (request "loadbalancer_adminstate_update"). A
//     per-node-UID memory of the last successful state makes repeats free;
//     a new Manager verifies with GETs.
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
//   - With WithDrainedCondition, the controller also maintains the node
//     condition LoadBalancerDrained (drained.go): True once Down has been in
//     effect on every entry of the node (or no pool holds it) for the pools'
//     drain period (Manager.DrainPeriod), with lastTransitionTime = when
//     Down took effect + the drain period (the node is requeued on the
//     clock for then); False when None is applied to a node that was True;
//     never written for a node never taken out of service. It is patched
//     (strategic merge of nodes/status, the node's UID as precondition)
//     only when its status changes; after a restart a node already True is
//     not written, and a Down node without it waits one drain period from
//     the re-verification.
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
