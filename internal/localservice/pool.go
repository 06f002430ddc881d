package localservice

import (
	"net/netip"
	"sort"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/azlb/azlb/internal/adminstate"
	"github.com/azlb/azlb/internal/provider"
)

// member is one desired backend address: the shape the provider writes
// (provider/pools.go), so the provider, the admin-state controller and the
// updater agree on every entry.
type member struct {
	name       string // node name
	ip         string // the node's first InternalIP of the pool's family
	adminState armnetwork.LoadBalancerBackendAddressAdminState
}

// eligible is the node filter the provider's pools see: the Service
// controller's (not being deleted, not labelled
// exclude-from-external-load-balancers, not tainted
// ToBeDeletedByClusterAutoscaler) and the provider's (control-plane nodes
// out unless includeControlPlane).
func eligible(n *v1.Node, includeControlPlane bool) bool {
	if n == nil || !n.DeletionTimestamp.IsZero() {
		return false
	}
	if _, ok := n.Labels[provider.LabelExcludeFromLB]; ok {
		return false
	}
	if !includeControlPlane {
		if _, ok := n.Labels[provider.LabelControlPlane]; ok {
			return false
		}
		if _, ok := n.Labels[provider.LabelLegacyMasterRole]; ok {
			return false
		}
	}
	for _, t := range n.Spec.Taints {
		if t.Key == TaintToBeDeletedByClusterAutoscaler {
			return false
		}
	}
	return true
}

// internalIP returns the node's first InternalIP of the family, or "".
func internalIP(n *v1.Node, family v1.IPFamily) string {
	for _, a := range n.Status.Addresses {
		if a.Type != v1.NodeInternalIP {
			continue
		}
		ip, err := netip.ParseAddr(a.Address)
		if err != nil {
			continue
		}
		if ip.Is4() == (family != v1.IPv6Protocol) {
			return ip.String()
		}
	}
	return ""
}

// members resolves node names to the pool's desired entries, sorted by
// name. Unknown or ineligible nodes and nodes without an InternalIP of the
// family are left out; the admin state follows the node's taints
// (adminstate.DesiredState).
func members(names sets.Set[string], family v1.IPFamily, node func(string) *v1.Node, includeControlPlane bool) []member {
	out := make([]member, 0, names.Len())
	for name := range names {
		n := node(name)
		if !eligible(n, includeControlPlane) {
			continue
		}
		ip := internalIP(n, family)
		if ip == "" {
			continue
		}
		out = append(out, member{name: n.Name, ip: ip, adminState: adminstate.DesiredState(n)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// poolDiff is what syncAddresses changed.
type poolDiff struct {
	changed          bool
	added, removed   int
	updated, members int
}

// syncAddresses makes the pool hold exactly the members, each with its
// admin state and the virtual network, matching entries by IP address
// (the provider's rule). It reports what changed; the pool is modified only
// when something did.
func syncAddresses(pool *armnetwork.BackendAddressPool, want []member, vnetID string) poolDiff {
	if pool.Properties == nil {
		pool.Properties = &armnetwork.BackendAddressPoolPropertiesFormat{}
	}
	have := map[string]*armnetwork.LoadBalancerBackendAddress{}
	for _, a := range pool.Properties.LoadBalancerBackendAddresses {
		if a != nil && a.Properties != nil {
			have[canonicalIP(deref(a.Properties.IPAddress))] = a
		}
	}
	d := poolDiff{members: len(want)}
	wantIPs := make(map[string]bool, len(want))
	out := make([]*armnetwork.LoadBalancerBackendAddress, 0, len(want))
	for _, m := range want {
		wantIPs[m.ip] = true
		h, ok := have[m.ip]
		switch {
		case !ok:
			d.added++
		case deref(h.Name) != m.name || adminStateOf(h) != m.adminState ||
			h.Properties.VirtualNetwork == nil || !strings.EqualFold(deref(h.Properties.VirtualNetwork.ID), vnetID):
			d.updated++
		}
		out = append(out, &armnetwork.LoadBalancerBackendAddress{
			Name: to.Ptr(m.name),
			Properties: &armnetwork.LoadBalancerBackendAddressPropertiesFormat{
				IPAddress:      to.Ptr(m.ip),
				VirtualNetwork: &armnetwork.SubResource{ID: to.Ptr(vnetID)},
				AdminState:     to.Ptr(m.adminState),
			},
		})
	}
	for ip := range have {
		if !wantIPs[ip] {
			d.removed++
		}
	}
	// Entries without properties, or two entries with one IP, are rewritten.
	malformed := len(pool.Properties.LoadBalancerBackendAddresses) != len(have)
	d.changed = d.added > 0 || d.removed > 0 || d.updated > 0 || malformed
	if d.changed {
		pool.Properties.LoadBalancerBackendAddresses = out
	}
	return d
}

// adminStateOf reads an entry's admin state; unset is None.
func adminStateOf(a *armnetwork.LoadBalancerBackendAddress) armnetwork.LoadBalancerBackendAddressAdminState {
	if a == nil || a.Properties == nil || a.Properties.AdminState == nil || *a.Properties.AdminState == "" {
		return armnetwork.LoadBalancerBackendAddressAdminStateNone
	}
	return *a.Properties.AdminState
}

func canonicalIP(s string) string {
	ip, err := netip.ParseAddr(s)
	if err != nil {
		return strings.ToLower(s)
	}
	return ip.String()
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
