package backendpool

import (
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"

	"github.com/azlb/azlb/internal/config"
	"github.com/azlb/azlb/internal/names"
)

// Policy is the one rule set for IP-based pool entries, built once from
// azure.json and shared by every pool writer (the Service reconcile, the
// local service updater, the admin-state controller): which nodes may be in
// a pool, what an entry holds, and which admin state it carries. Sharing it
// is what keeps the writers from undoing each other's writes.
type Policy struct {
	// VNetID is the virtual network every entry references ("" when
	// vnetName is not set: IP-based pools are then impossible).
	VNetID string
	// ExcludeControlPlane leaves control-plane nodes out
	// (excludeMasterFromStandardLB, true when unset).
	ExcludeControlPlane bool
	// AdminState makes entries carry the state the node's taints call for
	// (enableLoadBalancerAdminState, true when unset); off, every entry is
	// None, so turning the feature off also restores tainted nodes.
	AdminState bool
	// NICBased: cluster pools are NIC-based (nodeIPConfiguration). Nodes
	// join through their VMs' ip configurations; a pool write only sets
	// the admin state of their entries.
	NICBased bool
}

// PolicyFromConfig builds the policy azure.json describes.
func PolicyFromConfig(cfg *config.Config) Policy {
	p := Policy{
		ExcludeControlPlane: cfg.ExcludeMasterFromStandardLB == nil || *cfg.ExcludeMasterFromStandardLB,
		AdminState:          cfg.AdminStateEnabled(),
		NICBased:            cfg.LoadBalancerBackendPoolConfigurationType == config.BackendPoolNodeIPConfiguration,
	}
	if cfg.VnetName != "" {
		rg := cfg.VnetResourceGroup
		if rg == "" {
			rg = cfg.ResourceGroup
		}
		p.VNetID = names.VirtualNetworkID(cfg.SubscriptionID, rg, cfg.VnetName)
	}
	return p
}

// Eligible reports whether a node may be in a backend pool: not being
// deleted, not tainted ToBeDeletedByClusterAutoscaler, not labelled
// node.kubernetes.io/exclude-from-external-load-balancers (present and not a
// parseable "false"), and not a control-plane node while ExcludeControlPlane.
func (p Policy) Eligible(n *v1.Node) bool { return eligible(n, p.ExcludeControlPlane) }

// Pooled reports whether the node belongs in the pools of the family: it is
// eligible and has an InternalIP of that family (NIC-based: it has a
// providerID, and an IPv6 InternalIP for IPv6 pools).
func (p Policy) Pooled(n *v1.Node, family v1.IPFamily) bool {
	if !p.Eligible(n) {
		return false
	}
	if p.NICBased {
		return n.Spec.ProviderID != "" && (family != v1.IPv6Protocol || NodeInternalIP(n, family) != "")
	}
	return NodeInternalIP(n, family) != ""
}

// State is the admin state the node's entries must have.
func (p Policy) State(n *v1.Node) armnetwork.LoadBalancerBackendAddressAdminState {
	if !p.AdminState {
		return armnetwork.LoadBalancerBackendAddressAdminStateNone
	}
	return DesiredState(n)
}

// Members lists, sorted by name, the entries the nodes give a pool of the
// family: eligible nodes with an InternalIP of the family, each with the
// admin state State gives.
func (p Policy) Members(nodes []*v1.Node, family v1.IPFamily) []Member {
	keep := make([]*v1.Node, 0, len(nodes))
	for _, n := range nodes {
		if p.Eligible(n) {
			keep = append(keep, n)
		}
	}
	return members(keep, family, p.State)
}

// Sync makes the pool hold exactly the members, each with its admin state
// and the virtual network, matching entries by IP address. The pool is
// modified only when something differs; an entry whose name, admin state or
// virtual network differs is rewritten, one whose node is gone removed.
func (p Policy) Sync(pool *armnetwork.BackendAddressPool, want []Member) Diff {
	return sync(pool, want, p.VNetID)
}
