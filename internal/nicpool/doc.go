// Package nicpool writes the membership of NIC-based backend pools
// (loadBalancerBackendPoolConfigurationType nodeIPConfiguration). ARM keeps
// such a pool's members on the side of the ip configurations: a member is
// an ip configuration that lists the pool, and a pool PUT cannot add, drop
// or change one. So membership is written where the ip configurations
// live, and this package never writes a pool:
//
//   - Uniform scale set VMs: the scale set model (so new VMs join), then
//     each VM (scale set VM PUT), with If-Match; one VM at a time, or
//     Options.BatchSize at once for a scale set tagged
//     aks-managed-coordination, the operations of earlier PUTs running
//     while later ones are sent. Scale sets are written in parallel.
//   - Availability-set and standalone VMs: the primary network interface
//     (GET, then PUT with If-Match).
//   - Flexible scale set VMs: the scale set model, then each VM's network
//     interface.
//
// Which ip configuration joins: the primary network interface's primary
// ip configuration for IPv4 pools, its IPv6 one for IPv6 pools. Nodes whose
// VM does not run are left out; nodes without a providerID, in another
// resource group or subscription, in a scale set being deleted, or whose ip
// configuration already is in another cluster's load balancer are left out
// with a Warning event (EventReasonSkipped): nothing is lost, the next
// reconcile looks again. What the Inventory's cached listings already show
// as members costs no call.
//
// RemoveMembers takes ip configurations out of pools (stale members, a
// switch back to IP-based pools); Decouple takes a load balancer's pools
// out of every scale set model, VM and network interface before the load
// balancer is deleted (ARM refuses to delete a load balancer a scale set
// model uses). Both read each object afresh and write it with If-Match; a
// 412 reads it again once. They are meant for any caller that must detach
// nodes from a pool (a Basic to Standard migration as much as the Service
// reconcile). DecouplePools does it for pools of several load balancers
// at once (each scale set model, VM and NIC written once); RemoveMembers
// writes each VM or NIC once, whatever pools it leaves.
//
// A Writer is safe for concurrent use. The writes of one scale set (its
// model and VMs) or one network interface are made by one caller at a
// time (per-resource locks, internal/keymutex), so concurrent joins of two
// pools over the same VMs (a public load balancer's and its internal
// twin's) follow each other instead of meeting in 412s.
//
// Operator documentation: docs/nic-pools.md.
package nicpool
