package backendpool

import (
	"net/netip"
	"sort"
	"strconv"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/azlb/azlb/internal/config"
	"github.com/azlb/azlb/internal/names"
)

// Node labels and taints that keep a node out of backend pools.
const (
	LabelExcludeFromLB    = "node.kubernetes.io/exclude-from-external-load-balancers"
	LabelControlPlane     = "node-role.kubernetes.io/control-plane"
	LabelLegacyMasterRole = "node-role.kubernetes.io/master"
	// TaintToBeDeletedByClusterAutoscaler marks a node the cluster
	// autoscaler is removing; the service controller drops such nodes too
	// (at its next sync: the taint itself triggers none). It is also one of
	// the default admin-state taints (Policy.Taints).
	TaintToBeDeletedByClusterAutoscaler = config.TaintClusterAutoscalerToBeDeleted
)

// eligible reports whether a node may be in a backend pool: not being
// deleted, not tainted ToBeDeletedByClusterAutoscaler, not labelled
// exclude-from-external-load-balancers (read as the service controller
// does: present and not a parseable "false"), and, when excludeControlPlane,
// not a control-plane node.
func eligible(n *v1.Node, excludeControlPlane bool) bool {
	if n == nil || !n.DeletionTimestamp.IsZero() {
		return false
	}
	if v, ok := n.Labels[LabelExcludeFromLB]; ok {
		if exclude, err := strconv.ParseBool(v); err != nil || exclude {
			return false
		}
	}
	if excludeControlPlane {
		if _, ok := n.Labels[LabelControlPlane]; ok {
			return false
		}
		if _, ok := n.Labels[LabelLegacyMasterRole]; ok {
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

// NodeInternalIP returns the node's first InternalIP of the family, or "".
func NodeInternalIP(n *v1.Node, family v1.IPFamily) string {
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

// Member is one desired entry of a pool.
type Member struct {
	Name       string // node name
	IP         string // canonical form
	AdminState armnetwork.LoadBalancerBackendAddressAdminState
}

// members lists, sorted by name, the entries nodes give a pool of the
// family. Nodes without an InternalIP of the family are skipped; callers
// filter eligibility first. Each entry's admin state comes from state.
func members(nodes []*v1.Node, family v1.IPFamily, state func(*v1.Node) armnetwork.LoadBalancerBackendAddressAdminState) []Member {
	out := make([]Member, 0, len(nodes))
	for _, n := range nodes {
		if n == nil {
			continue
		}
		ip := NodeInternalIP(n, family)
		if ip == "" {
			continue
		}
		out = append(out, Member{Name: n.Name, IP: ip, AdminState: state(n)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Diff is what Sync changed.
type Diff struct {
	Changed                          bool
	Added, Removed, Updated, Members int
	// DrainPeriod: the pool's drainPeriodInSeconds was set or changed.
	DrainPeriod bool
}

// sync makes the pool hold exactly the members, each with its admin state
// and the virtual network, matching entries by IP address. The pool is
// modified only when something differs; an entry whose name, admin state or
// virtual network differs is rewritten, one whose node is gone removed.
func sync(pool *armnetwork.BackendAddressPool, want []Member, vnetID string) Diff {
	if pool.Properties == nil {
		pool.Properties = &armnetwork.BackendAddressPoolPropertiesFormat{}
	}
	have := map[string]*armnetwork.LoadBalancerBackendAddress{}
	var nicEntries []*armnetwork.LoadBalancerBackendAddress
	for _, a := range pool.Properties.LoadBalancerBackendAddresses {
		if IsNICEntry(a) {
			nicEntries = append(nicEntries, a) // never written here: ARM keeps them
			continue
		}
		if a != nil && a.Properties != nil {
			have[CanonicalIP(ptr.Deref(a.Properties.IPAddress, ""))] = a
		}
	}
	d := Diff{Members: len(want)}
	wantIPs := make(map[string]bool, len(want))
	out := make([]*armnetwork.LoadBalancerBackendAddress, 0, len(want))
	for _, m := range want {
		wantIPs[m.IP] = true
		h, ok := have[m.IP]
		switch {
		case !ok:
			d.Added++
		case ptr.Deref(h.Name, "") != m.Name || AdminStateOf(h) != m.AdminState ||
			h.Properties.VirtualNetwork == nil || !strings.EqualFold(ptr.Deref(h.Properties.VirtualNetwork.ID, ""), vnetID):
			d.Updated++
		}
		out = append(out, &armnetwork.LoadBalancerBackendAddress{
			Name: to.Ptr(m.Name),
			Properties: &armnetwork.LoadBalancerBackendAddressPropertiesFormat{
				IPAddress:      to.Ptr(m.IP),
				VirtualNetwork: &armnetwork.SubResource{ID: to.Ptr(vnetID)},
				AdminState:     to.Ptr(m.AdminState),
			},
		})
	}
	for ip := range have {
		if !wantIPs[ip] {
			d.Removed++
		}
	}
	// Entries without properties, or two entries with one IP, are rewritten.
	malformed := len(pool.Properties.LoadBalancerBackendAddresses) != len(have)+len(nicEntries)
	d.Changed = d.Added > 0 || d.Removed > 0 || d.Updated > 0 || malformed
	if d.Changed {
		pool.Properties.LoadBalancerBackendAddresses = append(nicEntries, out...)
	}
	return d
}

// IsNICEntry reports whether a pool entry stands for a NIC's ip
// configuration (a NIC-based pool member): it names one and has no IP
// address. ARM derives such entries from the NICs and scale set VMs; a
// pool write may change only their adminState.
func IsNICEntry(a *armnetwork.LoadBalancerBackendAddress) bool {
	return a != nil && a.Properties != nil && a.Properties.NetworkInterfaceIPConfiguration != nil &&
		ptr.Deref(a.Properties.NetworkInterfaceIPConfiguration.ID, "") != "" && ptr.Deref(a.Properties.IPAddress, "") == ""
}

// EntryKey is what identifies an entry's node: the canonical IP address of
// an IP-based entry, the owner of the ip configuration (a scale set VM's
// id, or a NIC's id; names.IPConfigOwner, lower-cased) of a NIC-derived
// one. "" for neither.
func EntryKey(a *armnetwork.LoadBalancerBackendAddress) string {
	switch {
	case a == nil || a.Properties == nil:
		return ""
	case IsNICEntry(a):
		return names.IPConfigOwner(*a.Properties.NetworkInterfaceIPConfiguration.ID)
	case ptr.Deref(a.Properties.IPAddress, "") != "":
		return CanonicalIP(*a.Properties.IPAddress)
	}
	return ""
}

// PoolKeys lists the keys (EntryKey) of every member of a pool: its
// entries, and the owners of its backendIPConfigurations.
func PoolKeys(p *armnetwork.BackendAddressPool) []string {
	if p == nil || p.Properties == nil {
		return nil
	}
	var out []string
	for _, a := range p.Properties.LoadBalancerBackendAddresses {
		if k := EntryKey(a); k != "" {
			out = append(out, k)
		}
	}
	for _, c := range p.Properties.BackendIPConfigurations {
		if c != nil && c.ID != nil {
			if k := names.IPConfigOwner(*c.ID); k != "" {
				out = append(out, k)
			}
		}
	}
	return out
}

// SetNICStates sets the admin state of the NIC-derived entries whose key
// (EntryKey) is in states; every other entry is left exactly as it is. It
// returns the keys whose entries it changed.
func SetNICStates(pool *armnetwork.BackendAddressPool, states map[string]armnetwork.LoadBalancerBackendAddressAdminState) []string {
	if pool == nil || pool.Properties == nil {
		return nil
	}
	var changed []string
	for _, a := range pool.Properties.LoadBalancerBackendAddresses {
		if !IsNICEntry(a) {
			continue
		}
		k := EntryKey(a)
		want, ok := states[k]
		if !ok || AdminStateOf(a) == want {
			continue
		}
		w := want
		a.Properties.AdminState = &w
		changed = append(changed, k)
	}
	return changed
}

// DropIPEntries removes a pool's IP-based entries and its virtual network
// (a switch to NIC-based pools); NIC-derived entries stay. It reports
// whether anything changed.
func DropIPEntries(pool *armnetwork.BackendAddressPool) bool {
	if pool == nil || pool.Properties == nil {
		return false
	}
	kept := make([]*armnetwork.LoadBalancerBackendAddress, 0, len(pool.Properties.LoadBalancerBackendAddresses))
	for _, a := range pool.Properties.LoadBalancerBackendAddresses {
		if IsNICEntry(a) {
			kept = append(kept, a)
		}
	}
	changed := len(kept) != len(pool.Properties.LoadBalancerBackendAddresses) || pool.Properties.VirtualNetwork != nil
	if changed {
		pool.Properties.LoadBalancerBackendAddresses = kept
		pool.Properties.VirtualNetwork = nil
	}
	return changed
}

// AdminStateOf reads an entry's admin state; unset is None.
func AdminStateOf(a *armnetwork.LoadBalancerBackendAddress) armnetwork.LoadBalancerBackendAddressAdminState {
	if a == nil || a.Properties == nil || a.Properties.AdminState == nil || *a.Properties.AdminState == "" {
		return armnetwork.LoadBalancerBackendAddressAdminStateNone
	}
	return *a.Properties.AdminState
}

// CanonicalIP normalises an address for comparison ("fd00::0001" and
// "fd00::1", or an IPv4-mapped IPv6 address and its IPv4 form, are the same
// entry). A string that is not an address is compared trimmed and
// lower-cased.
func CanonicalIP(s string) string {
	ip, err := netip.ParseAddr(strings.TrimSpace(s))
	if err != nil {
		return strings.ToLower(strings.TrimSpace(s))
	}
	return ip.Unmap().String()
}
