package nicpool

import (
	"encoding/json"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v7"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/azlb/azlb/internal/names"
)

// Which ip configuration of a VM joins a pool of a family: the primary
// network interface (the only one, else the one marked primary); in it, for
// IPv4 the primary ip configuration (the only one, else the one marked
// primary), for IPv6 the one whose privateIPAddressVersion is IPv6.

// scaleSetIPConfig picks the ip configuration of scale set style network
// configurations (a model's or a scale set VM's), or nil.
func scaleSetIPConfig(cfgs []*armcompute.VirtualMachineScaleSetNetworkConfiguration, family v1.IPFamily) *armcompute.VirtualMachineScaleSetIPConfiguration {
	var nic *armcompute.VirtualMachineScaleSetNetworkConfiguration
	for _, c := range cfgs {
		if c == nil || c.Properties == nil {
			continue
		}
		if len(cfgs) == 1 || ptr.Deref(c.Properties.Primary, false) {
			nic = c
			break
		}
	}
	if nic == nil {
		return nil
	}
	return pickIPConfig(nic.Properties.IPConfigurations, family, func(ic *armcompute.VirtualMachineScaleSetIPConfiguration) (bool, bool, bool) {
		if ic.Properties == nil {
			return false, false, false
		}
		return true, ptr.Deref(ic.Properties.PrivateIPAddressVersion, "") == armcompute.IPVersionIPv6, ptr.Deref(ic.Properties.Primary, false)
	})
}

// nicIPConfig picks the ip configuration of a network interface, or nil.
func nicIPConfig(nic *armnetwork.Interface, family v1.IPFamily) *armnetwork.InterfaceIPConfiguration {
	if nic == nil || nic.Properties == nil {
		return nil
	}
	return pickIPConfig(nic.Properties.IPConfigurations, family, func(ic *armnetwork.InterfaceIPConfiguration) (bool, bool, bool) {
		if ic.Properties == nil {
			return false, false, false
		}
		return true, ptr.Deref(ic.Properties.PrivateIPAddressVersion, "") == armnetwork.IPVersionIPv6, ptr.Deref(ic.Properties.Primary, false)
	})
}

// pickIPConfig picks, of a network interface's ip configurations, the one
// that joins a pool of the family (above); of tells whether one has
// properties, and whether it is IPv6 and marked primary.
func pickIPConfig[T any](ipcs []*T, family v1.IPFamily, of func(*T) (ok, v6, primary bool)) *T {
	for _, ic := range ipcs {
		if ic == nil {
			continue
		}
		ok, v6, primary := of(ic)
		switch {
		case !ok:
		case family == v1.IPv6Protocol:
			if v6 {
				return ic
			}
		case !v6 && (len(ipcs) == 1 || primary):
			return ic
		}
	}
	return nil
}

// poolState is where an ip configuration stands towards a pool.
type poolState int

const (
	poolAbsent  poolState = iota
	poolPresent           // it lists the pool
	poolForeign           // it lists a pool of a load balancer of another name
)

// lbBase is a load balancer's name without the internal suffix.
func lbBase(poolID string) string {
	i := strings.LastIndex(strings.ToLower(poolID), "/backendaddresspools/")
	if i < 0 {
		return ""
	}
	return strings.ToLower(names.PublicLB(names.ChildName(poolID[:i])))
}

// stateOf tells whether the pool ids list holds poolID, or a pool of a
// load balancer with another name (ignoring -internal: one ip
// configuration cannot be in two public or two internal load balancers,
// and another cluster's load balancer is not azlb's to compete with).
func stateOf(ids []string, poolID string) (poolState, string) {
	for _, id := range ids {
		if strings.EqualFold(id, poolID) {
			return poolPresent, ""
		}
	}
	for _, id := range ids {
		if lbBase(id) != lbBase(poolID) {
			return poolForeign, id
		}
	}
	return poolAbsent, ""
}

func subIDs(refs []*armcompute.SubResource) []string {
	out := make([]string, 0, len(refs))
	for _, r := range refs {
		if r != nil {
			out = append(out, ptr.Deref(r.ID, ""))
		}
	}
	return out
}

func poolIDs(refs []*armnetwork.BackendAddressPool) []string {
	out := make([]string, 0, len(refs))
	for _, r := range refs {
		if r != nil {
			out = append(out, ptr.Deref(r.ID, ""))
		}
	}
	return out
}

// withoutScaleSetPools drops the listed pools (lower-cased ids) from a
// scale set ip configuration's pools; it reports whether it dropped any.
func withoutScaleSetPools(ic *armcompute.VirtualMachineScaleSetIPConfiguration, pools map[string]bool) bool {
	if ic == nil || ic.Properties == nil {
		return false
	}
	var dropped bool
	ic.Properties.LoadBalancerBackendAddressPools, dropped = withoutRefs(ic.Properties.LoadBalancerBackendAddressPools,
		func(r *armcompute.SubResource) *string { return r.ID }, pools)
	return dropped
}

// withoutNICPools is withoutScaleSetPools for a NIC's ip configuration.
func withoutNICPools(ic *armnetwork.InterfaceIPConfiguration, pools map[string]bool) bool {
	if ic == nil || ic.Properties == nil {
		return false
	}
	var dropped bool
	ic.Properties.LoadBalancerBackendAddressPools, dropped = withoutRefs(ic.Properties.LoadBalancerBackendAddressPools,
		func(r *armnetwork.BackendAddressPool) *string { return r.ID }, pools)
	return dropped
}

// withoutRefs drops, in place, the references whose lower-cased id is in
// pools; it reports whether it dropped any.
func withoutRefs[T any](refs []*T, id func(*T) *string, pools map[string]bool) ([]*T, bool) {
	kept := refs[:0]
	dropped := false
	for _, r := range refs {
		if r != nil && pools[strings.ToLower(ptr.Deref(id(r), ""))] {
			dropped = true
			continue
		}
		kept = append(kept, r)
	}
	return kept, dropped
}

func addScaleSetPool(ic *armcompute.VirtualMachineScaleSetIPConfiguration, poolID string) {
	ic.Properties.LoadBalancerBackendAddressPools = append(ic.Properties.LoadBalancerBackendAddressPools, &armcompute.SubResource{ID: to.Ptr(poolID)})
}

func addNICPool(ic *armnetwork.InterfaceIPConfiguration, poolID string) {
	ic.Properties.LoadBalancerBackendAddressPools = append(ic.Properties.LoadBalancerBackendAddressPools, &armnetwork.BackendAddressPool{ID: to.Ptr(poolID)})
}

// copyJSON deep-copies an SDK value through its own JSON codec (the
// Inventory's objects are shared and must not be edited in place).
func copyJSON[T any](v T) (T, error) {
	var out T
	b, err := json.Marshal(v)
	if err != nil {
		return out, err
	}
	err = json.Unmarshal(b, &out)
	return out, err
}

func lowerSet(ids []string) map[string]bool {
	m := make(map[string]bool, len(ids))
	for _, id := range ids {
		m[strings.ToLower(id)] = true
	}
	return m
}

// nodeNamed is a stand-in node for a VM no node names (removals name the
// VM in logs and errors).
func nodeNamed(name string) *v1.Node {
	n := &v1.Node{}
	n.Name = name
	return n
}
