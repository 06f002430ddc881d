package provider

import (
	"net/netip"
	"sort"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"

	"github.com/azlb/azlb/internal/adminstate"
)

// poolMember is one desired backend address of an IP-based pool.
type poolMember struct {
	name       string // node name
	ip         string
	adminState armnetwork.LoadBalancerBackendAddressAdminState
}

// nodeInternalIP returns the node's first InternalIP of the family.
func nodeInternalIP(node *v1.Node, family v1.IPFamily) string {
	for _, a := range node.Status.Addresses {
		if a.Type != v1.NodeInternalIP {
			continue
		}
		ip, err := netip.ParseAddr(a.Address)
		if err != nil {
			continue
		}
		if ip.Is4() == (family == v1.IPv4Protocol) {
			return ip.String()
		}
	}
	return ""
}

// poolMembers lists, sorted by name, the backend addresses nodes give a pool
// of the family. Nodes without an InternalIP of the family are skipped.
func poolMembers(nodes []*v1.Node, family v1.IPFamily) []poolMember {
	out := make([]poolMember, 0, len(nodes))
	for _, n := range nodes {
		ip := nodeInternalIP(n, family)
		if ip == "" {
			continue
		}
		out = append(out, poolMember{name: n.Name, ip: ip, adminState: adminstate.DesiredState(n)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// syncPoolAddresses makes the pool hold exactly the members, each with its
// desired admin state, pointing at the virtual network. It reports whether
// anything changed. Entries are matched by IP address; an entry whose node is
// gone is removed.
func syncPoolAddresses(pool *armnetwork.BackendAddressPool, members []poolMember, vnetID string) bool {
	if pool.Properties == nil {
		pool.Properties = &armnetwork.BackendAddressPoolPropertiesFormat{}
	}
	have := map[string]*armnetwork.LoadBalancerBackendAddress{}
	for _, a := range pool.Properties.LoadBalancerBackendAddresses {
		if a != nil && a.Properties != nil {
			have[canonicalIP(deref(a.Properties.IPAddress))] = a
		}
	}
	changed := len(have) != len(members) || len(pool.Properties.LoadBalancerBackendAddresses) != len(members)
	out := make([]*armnetwork.LoadBalancerBackendAddress, 0, len(members))
	for _, m := range members {
		want := &armnetwork.LoadBalancerBackendAddress{
			Name: to.Ptr(m.name),
			Properties: &armnetwork.LoadBalancerBackendAddressPropertiesFormat{
				IPAddress:      to.Ptr(m.ip),
				VirtualNetwork: &armnetwork.SubResource{ID: to.Ptr(vnetID)},
				AdminState:     to.Ptr(m.adminState),
			},
		}
		h, ok := have[m.ip]
		if !ok || deref(h.Name) != m.name || adminStateOf(h) != m.adminState ||
			h.Properties.VirtualNetwork == nil || !idEqual(deref(h.Properties.VirtualNetwork.ID), vnetID) {
			changed = true
		}
		out = append(out, want)
	}
	if changed {
		pool.Properties.LoadBalancerBackendAddresses = out
	}
	return changed
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

// findPool returns the named pool of a load balancer, or nil.
func findPool(lb *armnetwork.LoadBalancer, name string) *armnetwork.BackendAddressPool {
	if lb == nil || lb.Properties == nil {
		return nil
	}
	if i := findByName(lb.Properties.BackendAddressPools, name, poolNameOf); i >= 0 {
		return lb.Properties.BackendAddressPools[i]
	}
	return nil
}
