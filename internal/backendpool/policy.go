package backendpool

import (
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

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
	// Taints are the taints, beyond the built-in ones, that take a node
	// Down (loadBalancerAdminStateTaints). nil means the documented default
	// (the cluster autoscaler's and Karpenter's deletion taints), so a
	// Policy built by hand behaves as an azure.json that does not set them;
	// an empty, non-nil list adds none.
	Taints []config.TaintSelector
	// DrainPeriodInSeconds is the drainPeriodInSeconds of the pools azlb
	// owns (loadBalancerBackendPoolDrainPeriodInSeconds); 0 leaves it unset,
	// and Azure resets a leaving member's flows at once.
	DrainPeriodInSeconds int32
}

// PolicyFromConfig builds the policy azure.json describes.
func PolicyFromConfig(cfg *config.Config) Policy {
	p := Policy{
		ExcludeControlPlane:  cfg.ExcludeMasterFromStandardLB == nil || *cfg.ExcludeMasterFromStandardLB,
		AdminState:           cfg.AdminStateEnabled(),
		NICBased:             cfg.LoadBalancerBackendPoolConfigurationType == config.BackendPoolNodeIPConfiguration,
		Taints:               cfg.AdminStateTaints(),
		DrainPeriodInSeconds: cfg.BackendPoolDrainPeriodInSeconds(),
	}
	if cfg.VnetName != "" {
		rg := cfg.VnetResourceGroup
		if rg == "" {
			rg = cfg.ResourceGroup
		}
		p.VNetID = names.VirtualNetworkID(cfg.NetworkSubscriptionID(), rg, cfg.VnetName)
	}
	return p
}

// Eligible reports whether a node may be in a backend pool: not being
// deleted, not tainted ToBeDeletedByClusterAutoscaler, not labelled
// node.kubernetes.io/exclude-from-external-load-balancers (present and not a
// parseable "false"), and not a control-plane node while ExcludeControlPlane.
//
// These are the Kubernetes service controller's own rules for the nodes it
// hands to cloud providers, so the pool writers that start from its node
// list and those that start from the node lister agree. The autoscaler's
// taint is also an admin-state trigger by default (Taints): the admin-state
// controller takes the node Down at once, and the node stays in its pools
// until the next write of each pool drops it (that write does not follow
// the taint: a node set change, the node's deletion, a Local Service's
// endpoints), when the pool's drain period (DrainPeriodInSeconds) keeps its
// established flows.
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
	return p.DesiredState(n)
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
// and the virtual network, matching entries by IP address, and gives it the
// policy's drain period (SetDrainPeriod). The pool is modified only when
// something differs; an entry whose name, admin state or virtual network
// differs is rewritten, one whose node is gone removed.
func (p Policy) Sync(pool *armnetwork.BackendAddressPool, want []Member) Diff {
	d := sync(pool, want, p.VNetID)
	if p.SetDrainPeriod(pool) {
		d.DrainPeriod, d.Changed = true, true
	}
	return d
}

// SetDrainPeriod gives a pool azlb owns (a cluster pool, a Local Service's
// pool) the policy's drainPeriodInSeconds: unset when DrainPeriodInSeconds
// is 0 (unset and 0 are the same to Azure). It reports whether the pool
// changed.
func (p Policy) SetDrainPeriod(pool *armnetwork.BackendAddressPool) bool {
	if pool == nil {
		return false
	}
	if pool.Properties == nil {
		pool.Properties = &armnetwork.BackendAddressPoolPropertiesFormat{}
	}
	if ptr.Deref(pool.Properties.DrainPeriodInSeconds, 0) == p.DrainPeriodInSeconds {
		return false
	}
	pool.Properties.DrainPeriodInSeconds = nil
	if p.DrainPeriodInSeconds > 0 {
		pool.Properties.DrainPeriodInSeconds = to.Ptr(p.DrainPeriodInSeconds)
	}
	return true
}
