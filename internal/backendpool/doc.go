// Package backendpool is the one definition of what an IP-based backend
// pool entry looks like and which nodes may be in a pool. The Service
// reconcile (cluster pools and Local Service pools), the local service
// updater and the admin-state controller all write pools; sharing one Policy
// is what keeps them from undoing each other's writes.
//
// Contract:
//
//   - Policy is built once from azure.json (PolicyFromConfig): the virtual
//     network entries reference, whether control-plane nodes are left out
//     (excludeMasterFromStandardLB), whether entries carry the admin
//     state the node's taints call for (enableLoadBalancerAdminState), which
//     taints those are, and the pools' drain period.
//   - An entry is named after its node, holds the node's first InternalIP of
//     the pool's IP family, references the virtual network, and carries
//     Policy.State(node). Entries are matched by IP address (CanonicalIP).
//   - NIC-derived entries (NIC-based pools: no IP address, a
//     networkInterfaceIPConfiguration) are never added, dropped or changed
//     here except for their admin state (SetNICStates); they are matched to
//     nodes by the owner of their ip configuration (EntryKey: a scale set
//     VM's id or a NIC's id). Sync keeps them as they are.
//   - The taints that take a node out of rotation (Policy.DesiredState:
//     Down) are the built-in node.kubernetes.io/out-of-service,
//     node.cloudprovider.kubernetes.io/shutdown and
//     cloudprovider.azure.microsoft.com/draining=spot-eviction, and those of
//     loadBalancerAdminStateTaints (Policy.Taints; by default the cluster
//     autoscaler's ToBeDeletedByClusterAutoscaler and Karpenter's
//     karpenter.sh/disrupted:NoSchedule). Cordoning never is one.
//   - The pools azlb owns (cluster pools, Local Service pools) carry the
//     drain period of loadBalancerBackendPoolDrainPeriodInSeconds
//     (Policy.SetDrainPeriod, which Sync applies).
//   - A Local Service's dedicated pool follows one rule, shared by every
//     writer of it (the Service reconcile and drift pass, the local service
//     updater, the admin-state controller): LocalEndpointsOf reads the
//     Service's EndpointSlices (KEP-1672), Policy.LocalMembers and
//     Policy.LocalState turn them into entries. A node with a ready
//     endpoint is a member with the state its taints call for; a node whose
//     endpoints are all terminating but serving (serving explicitly true)
//     is a member and Down while the Service has a ready endpoint elsewhere
//     (None when it has none: they still take traffic); every other node
//     is out. With AdminState off a draining node is left out instead of
//     Down. LocalPools tells a writer that meets pools by name which
//     entries of a Local Service's pool its endpoints keep Down.
//
// Everything here is pure, except ServiceEndpoints, EndpointNodes and
// LocalPools, which read listers.
package backendpool
