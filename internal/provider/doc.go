// Package provider implements cloudprovider.LoadBalancer and
// cloudprovider.InstancesV2 (and the cloudprovider.Interface registered as
// "azure"): the Service reconcile that gives each LoadBalancer Service
// frontends, rules and probes on an Azure Standard load balancer, and keeps
// the load balancer's node pools in line with the cluster's nodes.
//
// Contract:
//
//   - Every load balancer and pool read or write goes through the
//     lbstore.Store given in Options (no ARM load balancer client is used
//     here). Public IPs, which each Service owns alone, are read and written
//     directly, in the cluster's resource group or the one
//     azure-load-balancer-resource-group names; azlb writes only those it
//     owns (tags k8s-azure-service and k8s-azure-cluster-name): created
//     ones (Standard, static, zone-redundant where the region has zones,
//     from azure-pip-prefix-id(-ipv6), with azure-pip-ip-tags) and their
//     tags (azure.json tags, azure-pip-tags). Load balancers carry
//     azure.json tags too (set by the Service mutation). Zones and IP tags
//     are never changed on existing objects (zones.go, publicip.go).
//   - A Service reconcile is one plan (plan.go): everything the Service
//     will own is computed and checked from reads (annotations, node ports,
//     protocols, access settings, placement, public IPs, shared IPs, rule
//     limits, the NSG's limits, Private Link Service settings with the NAT
//     subnet read) before the first write. A refused Service (a *Refusal)
//     gets one Warning event per generation and reason, and nothing of its
//     change is written; one already served keeps what it has but for its
//     security rules, narrowed to what its settings allow now (failing
//     closed); one with no frontend gets what azlb left of it (an owned
//     public IP) deleted. The drift pass counts a refusal as no failure.
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
//     SyncClusterPools does the same for the cluster pools of every
//     configured load balancer, with every node the node lister holds (the
//     node-label controller calls it when a node's labels change). Placement
//     and eligibility always read a node's labels from the node lister, so a
//     node list taken before a relabel does not move the node back.
//   - Cluster pools are NIC-based by default (loadBalancerBackendPoolConfigurationType
//     nodeIPConfiguration, single load balancer mode): after the load
//     balancer write, the nodes' ip configurations join through their scale
//     set models and VMs or NICs (internal/nicpool), stopped VMs and bad
//     input (no providerID, another resource group, a scale set being
//     deleted) left out with a Warning event; members of excluded nodes
//     leave unless the pool would be empty; each member's entry then gets
//     the admin state its node's taints call for, every other entry echoed
//     unchanged. Deleting a load balancer decouples its pools first. With
//     nodeIP, a pool still holding NIC-based members is decoupled before its
//     IP entries are written, and with nodeIPConfiguration a pool's IP
//     entries are dropped first.
//   - Instances (cloudprovider.InstancesV2) answers the cloud node and cloud
//     node lifecycle controllers from the compute Inventory: a node's VM,
//     its existence and power state, with bounded cached listings.
//   - Pool entries follow backendpool.Policy, with taints read from the node
//     lister at write time, so a pool rewrite never puts None back over a
//     Down the admin-state controller set.
//   - Reconciles of one Service are serialised; different Services run
//     concurrently (--concurrent-service-syncs) and share store rounds.
//   - Bad annotations are Warning events (InvalidLoadBalancerAnnotation)
//     and errors; nothing is written for such a Service.
//
// Operator documentation: docs/load-balancers.md,
// docs/multiple-load-balancers.md, docs/nic-pools.md and
// docs/node-lifecycle.md.
package provider
