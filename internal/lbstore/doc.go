// Package lbstore is the only code that reads or writes Azure load balancers
// and their backend address pools. The Service reconcile, the admin-state
// controller and the local service updater all go through one Store, so the
// rules that keep their writes from undoing each other live here, once.
//
// Contract:
//
//   - One writer. Every write (UpdateLB, UpdatePools) is queued and carried
//     out by the goroutine running Run, in rounds: a round takes every queued
//     change, groups them by load balancer and writes the load balancers
//     concurrently — per load balancer first its whole-resource mutations
//     (one read, usually from the cache, and at most one PUT or DELETE), then
//     its pool edits (one fresh GET and at most one PUT per pool, or with
//     PoolOptions.WriteFromCache up to two pools written from the cached
//     copy, one after another, with If-Match and no GET). Changes
//     queued while a round runs share the next one (group commit), so N
//     concurrent callers cost one write per object, not N. A round of load
//     balancer mutations only first waits GatherWindow for more; a round
//     with pool edits starts at once. Nothing is written
//     while Run is not running; when Run's context ends (the leader lost its
//     lease) queued changes fail with ErrStopped and no further write starts.
//   - Bounded memory. Whole-load-balancer GETs and PUTs in flight at once
//     are bounded by LBTransferBudget, in elements (frontends, rules,
//     probes, pools, pool members; a GET is charged the size last seen): a
//     load balancer of a 5,000-node cluster is read or written alone, small
//     ones together, first come first served. Each transfer holds its
//     encoded body and decoded answer until it returns (including the SDK's
//     retries of a 5xx and a throttle gate's wait), and the live heap sets
//     the controller's peak memory.
//   - A caller's context bounds its wait only: a change whose context ends
//     before its round starts is dropped; once its round started it completes
//     under Run's context.
//   - One conflict policy. Load balancer PUTs carry If-Match with the etag
//     they were computed from. A pool PUT carries If-Match when it is the only
//     pool of its load balancer written in the round; several pools of one
//     load balancer (they share its etag) are written concurrently without
//     it, which is safe because the Store is the only writer. Pools written
//     from the cache (WriteFromCache: the load balancer's cached copy is
//     fresh with a known etag, at most two of its pools change) each carry
//     If-Match: the cached etag, then the one the previous write returned;
//     a 412 means the copy was not current and is handled like any
//     conflict, and the pools after it are read afresh. A 412 or 409 is
//     retried up to MaxConflictRetries times with a fresh GET and If-Match.
//     Not-found is not an error for an edit: the result says Missing.
//   - Edits and mutations must check before they change: one that returns an
//     error must leave its object untouched, because other callers' changes
//     share the write; its error goes to its caller only. They may be called
//     more than once (a conflict retry edits a fresh copy again) and must not
//     keep the object they are given.
//   - A coherent cache. Load balancers read or written are cached for
//     loadBalancerCacheTTLInSeconds. Every write bumps the load balancer's
//     generation before it is sent and again when its result is installed; a
//     read installs its result only if the generation did not move while it
//     was in flight. So an older read can never overwrite newer state, and no
//     caller invalidates anything: a pool written through the Store is
//     patched into the cached load balancer (with the new etag, which ARM
//     shares between a load balancer and its children). Returned load
//     balancers and pools are shared snapshots: callers must not modify them.
//     A change with UpdateOptions.Fresh is checked against ARM before its
//     round declares the load balancer unchanged, or creates or deletes it:
//     a Service reconcile never reports success from the cache. (A write
//     of a changed copy carries its etag, so it needs no extra read.)
//   - Managed load balancers are the configured ones (the default or every
//     multipleStandardLoadBalancerConfigurations entry, each with its
//     internal twin) plus those found once by listing the resource group
//     (Standard SKU, holding the cluster's node pool or tagged with its
//     cluster name): a load balancer whose configuration was removed stays
//     managed, so its Services can leave it.
//   - Delete removes a whole load balancer through the writer (decoupling
//     its pools first, see NIC-based pools below), whatever its SKU or content: the Basic
//     to Standard migration uses it for the Basic load balancers; it never
//     adopts them (Managed lists only configured names and Standard ones).
//   - List reads every load balancer of the resource group into the cache
//     (for a caller that then writes many of them, such as the per-Service
//     load balancers of pod-based load balancing); UpdateOptions.AssumeAbsent
//     lets such a caller create one it did not find without reading it
//     first.
//   - PoolsWith answers which pools hold an address or a NIC-based member
//     (by the owner of its ip configuration, backendpool.EntryKey) from the
//     cache (or a fresh read when asked), and FindPool where a pool lives.
//   - NIC-based pools (nodeIPConfiguration): their members are ip
//     configurations that list the pool, written on scale sets, scale set
//     VMs and network interfaces, never through the Store; a pool write
//     leaves their entries as they are except for adminState, and does not
//     send the read-only backendIPConfigurations. A caller that changed
//     membership that way calls ExternalChange, so the next read is fresh.
//     With a Decoupler, deleting a load balancer first takes its pools out
//     of every scale set model, VM and network interface (ARM refuses the
//     delete while a scale set model lists one), and a delete refused with
//     LoadBalancerInUseByVirtualMachineScaleSet decouples the scale set
//     named and is tried once more.
//   - Time comes from an injected k8s.io/utils/clock.
package lbstore
