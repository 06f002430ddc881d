package provider

import (
	"slices"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	"k8s.io/utils/ptr"

	"github.com/azlb/azlb/internal/names"
)

// The functions here edit a load balancer object in memory. They are pure and
// report whether anything changed, so a reconcile that finds Azure already in
// the desired state makes no write.

// applyService makes lb hold exactly the Service's desired frontends, rules
// and probes (one state per IP family) and no other children owned by base.
// Pools named in pools are added when missing: empty, or, when adopt maps
// the pool to an existing one (a Local Service pool named the legacy way),
// with a copy of that pool's entries and drain period, so traffic keeps
// flowing while the rules move over. Addresses of existing pools are never
// touched here. Pools named in drop (dedicated pools the Service no longer
// uses, legacy names included) are removed once no rule references them.
func applyService(lb *armnetwork.LoadBalancer, base string, want []*serviceLBState, pools, drop []string, adopt map[string]string) bool {
	changed, _ := applySharedService(lb, base, want, pools, drop, adopt, nil)
	return changed
}

// applySharedService is applyService for frontends that several Services
// share (sharedip.go): a frontend the Service owns and no longer wants
// stays while another Service's rule uses it, and a frontend of another
// Service that this one's rules used and nothing uses any more goes when
// liveBase (nil: never) says no Service owns it. It returns the frontends
// it removed that the Service did not own (their public IPs may be
// orphans).
func applySharedService(lb *armnetwork.LoadBalancer, base string, want []*serviceLBState, pools, drop []string, adopt map[string]string,
	liveBase func(string) bool) (bool, []*armnetwork.FrontendIPConfiguration) {
	p := lbProps(lb)
	changed := false

	var fes []*armnetwork.FrontendIPConfiguration
	var rules []*armnetwork.LoadBalancingRule
	var probes []*armnetwork.Probe
	var shared *armnetwork.Probe
	for _, st := range want {
		if st.frontend != nil {
			fes = append(fes, st.frontend)
		}
		rules = append(rules, st.rules...)
		probes = append(probes, st.probes...)
		if st.sharedProbe != nil {
			shared = st.sharedProbe
		}
	}
	usedBefore := frontendsOfRules(p.LoadBalancingRules, base)

	var c bool
	p.LoadBalancingRules, c = syncOwned(p.LoadBalancingRules, base, rules, ruleNameOf, ruleEqual)
	changed = changed || c
	// Frontends after rules: one the Service owns stays while another
	// Service's rule still uses it (Azure refuses to remove a referenced
	// frontend).
	kept := p.FrontendIPConfigurations
	p.FrontendIPConfigurations, c = syncOwned(p.FrontendIPConfigurations, base, fes, feNameOf, frontendEqual)
	if c {
		for _, fe := range kept {
			if names.Owns(base, feNameOf(fe)) && findByName(p.FrontendIPConfigurations, feNameOf(fe), feNameOf) < 0 && frontendReferenced(p, fe) {
				p.FrontendIPConfigurations = append(p.FrontendIPConfigurations, fe)
			}
		}
		c = !samePointers(kept, p.FrontendIPConfigurations)
	}
	changed = changed || c
	var orphans []*armnetwork.FrontendIPConfiguration
	if liveBase != nil {
		for id := range usedBefore {
			i := slices.IndexFunc(p.FrontendIPConfigurations, func(fe *armnetwork.FrontendIPConfiguration) bool { return idEqual(ptr.Deref(fe.ID, ""), id) })
			if i < 0 {
				continue
			}
			fe := p.FrontendIPConfigurations[i]
			if names.Owns(base, feNameOf(fe)) || frontendReferenced(p, fe) || liveBase(names.ServiceBaseOf(feNameOf(fe))) {
				continue
			}
			p.FrontendIPConfigurations = slices.Delete(p.FrontendIPConfigurations, i, i+1)
			orphans = append(orphans, fe)
			changed = true
		}
	}
	p.Probes, c = syncOwned(p.Probes, base, probes, probeNameOf, probeEqual)
	changed = changed || c
	if shared != nil {
		p.Probes, c = upsert(p.Probes, shared, probeNameOf, probeEqual)
		changed = changed || c
	}
	for _, name := range pools {
		if findByName(p.BackendAddressPools, name, poolNameOf) < 0 {
			pool := &armnetwork.BackendAddressPool{Name: to.Ptr(name)}
			if from := adopt[name]; from != "" {
				if i := findByName(p.BackendAddressPools, from, poolNameOf); i >= 0 {
					pool.Properties = &armnetwork.BackendAddressPoolPropertiesFormat{
						LoadBalancerBackendAddresses: copyEntries(p.BackendAddressPools[i]),
						DrainPeriodInSeconds:         drainPeriodOf(p.BackendAddressPools[i]),
					}
				}
			}
			p.BackendAddressPools = append(p.BackendAddressPools, pool)
			changed = true
		}
	}
	for _, name := range drop {
		if containsFold(pools, name) || poolReferenced(p, name) {
			continue
		}
		if i := findByName(p.BackendAddressPools, name, poolNameOf); i >= 0 {
			p.BackendAddressPools = append(p.BackendAddressPools[:i:i], p.BackendAddressPools[i+1:]...)
			changed = true
		}
	}
	if pruneSharedProbe(p) {
		changed = true
	}
	return changed, orphans
}

// removeService deletes every rule and probe owned by base, its frontends
// that no other Service's rule uses, and the pools named in drop that no
// remaining rule references.
func removeService(lb *armnetwork.LoadBalancer, base string, drop []string) bool {
	return applyService(lb, base, nil, nil, drop, nil)
}

// poolReferenced reports whether a load-balancing rule sends traffic to the
// pool: deleting it would fail (InvalidResourceReference).
func poolReferenced(p *armnetwork.LoadBalancerPropertiesFormat, pool string) bool {
	for _, r := range p.LoadBalancingRules {
		if r.Properties == nil {
			continue
		}
		if r.Properties.BackendAddressPool != nil && names.ChildOf(ptr.Deref(r.Properties.BackendAddressPool.ID, ""), "backendAddressPools", pool) {
			return true
		}
		for _, bp := range r.Properties.BackendAddressPools {
			if bp != nil && names.ChildOf(ptr.Deref(bp.ID, ""), "backendAddressPools", pool) {
				return true
			}
		}
	}
	return false
}

// drainPeriodOf is a pool's drainPeriodInSeconds, which a pool that takes
// its place keeps.
func drainPeriodOf(pool *armnetwork.BackendAddressPool) *int32 {
	if pool.Properties == nil {
		return nil
	}
	return pool.Properties.DrainPeriodInSeconds
}

// copyEntries copies the IP-based entries of a pool (name, address, virtual
// network, admin state) for a pool that takes its place.
func copyEntries(pool *armnetwork.BackendAddressPool) []*armnetwork.LoadBalancerBackendAddress {
	if pool.Properties == nil {
		return nil
	}
	var out []*armnetwork.LoadBalancerBackendAddress
	for _, a := range pool.Properties.LoadBalancerBackendAddresses {
		if a == nil || a.Properties == nil || a.Properties.IPAddress == nil {
			continue
		}
		out = append(out, &armnetwork.LoadBalancerBackendAddress{
			Name: a.Name,
			Properties: &armnetwork.LoadBalancerBackendAddressPropertiesFormat{
				IPAddress:      a.Properties.IPAddress,
				VirtualNetwork: a.Properties.VirtualNetwork,
				AdminState:     a.Properties.AdminState,
			},
		})
	}
	return out
}

func containsFold(list []string, s string) bool {
	for _, x := range list {
		if strings.EqualFold(x, s) {
			return true
		}
	}
	return false
}

// pruneSharedProbe removes the shared probe when no rule references it.
func pruneSharedProbe(p *armnetwork.LoadBalancerPropertiesFormat) bool {
	i := findByName(p.Probes, names.SharedProbe, probeNameOf)
	if i < 0 {
		return false
	}
	for _, r := range p.LoadBalancingRules {
		if r.Properties != nil && r.Properties.Probe != nil && strings.HasSuffix(strings.ToLower(ptr.Deref(r.Properties.Probe.ID, "")), "/probes/"+strings.ToLower(names.SharedProbe)) {
			return false
		}
	}
	p.Probes = append(p.Probes[:i], p.Probes[i+1:]...)
	return true
}

// frontendCount is the number of frontends on the load balancer; a load
// balancer without frontends is deleted.
func frontendCount(lb *armnetwork.LoadBalancer) int {
	if lb == nil || lb.Properties == nil {
		return 0
	}
	return len(lb.Properties.FrontendIPConfigurations)
}

// ruleCount counts load-balancing rules, for placement and the
// maximumLoadBalancerRuleCount limit.
func ruleCount(lb *armnetwork.LoadBalancer) int {
	if lb == nil || lb.Properties == nil {
		return 0
	}
	return len(lb.Properties.LoadBalancingRules)
}

func lbProps(lb *armnetwork.LoadBalancer) *armnetwork.LoadBalancerPropertiesFormat {
	if lb.Properties == nil {
		lb.Properties = &armnetwork.LoadBalancerPropertiesFormat{}
	}
	return lb.Properties
}

// syncOwned replaces the items owned by base with want, keeping every item
// owned by someone else, in order. Items already equal are kept as they are.
func syncOwned[T any](have []*T, base string, want []*T, name func(*T) string, equal func(a, b *T) bool) ([]*T, bool) {
	changed := false
	out := make([]*T, 0, len(have)+len(want))
	wanted := map[string]*T{}
	for _, w := range want {
		wanted[strings.ToLower(name(w))] = w
	}
	seen := map[string]bool{}
	for _, h := range have {
		n := strings.ToLower(name(h))
		if !names.Owns(base, n) {
			out = append(out, h)
			continue
		}
		w, ok := wanted[n]
		switch {
		case !ok:
			changed = true // owned but no longer wanted: drop
		case equal(h, w):
			out = append(out, h)
			seen[n] = true
		default:
			out = append(out, w)
			seen[n] = true
			changed = true
		}
	}
	for _, w := range want {
		if !seen[strings.ToLower(name(w))] {
			out = append(out, w)
			changed = true
		}
	}
	return out, changed
}

// upsert adds or replaces one item by name.
func upsert[T any](have []*T, w *T, name func(*T) string, equal func(a, b *T) bool) ([]*T, bool) {
	i := findByName(have, name(w), name)
	if i < 0 {
		return append(have, w), true
	}
	if equal(have[i], w) {
		return have, false
	}
	have[i] = w
	return have, true
}

func findByName[T any](items []*T, n string, name func(*T) string) int {
	for i, it := range items {
		if strings.EqualFold(name(it), n) {
			return i
		}
	}
	return -1
}

func feNameOf(f *armnetwork.FrontendIPConfiguration) string { return ptr.Deref(f.Name, "") }
func ruleNameOf(r *armnetwork.LoadBalancingRule) string     { return ptr.Deref(r.Name, "") }
func probeNameOf(p *armnetwork.Probe) string                { return ptr.Deref(p.Name, "") }
func poolNameOf(p *armnetwork.BackendAddressPool) string    { return ptr.Deref(p.Name, "") }

func frontendEqual(a, b *armnetwork.FrontendIPConfiguration) bool {
	pa, pb := a.Properties, b.Properties
	if pa == nil || pb == nil {
		return pa == pb
	}
	if !idEqual(subID(pa.PublicIPAddress), subID(pb.PublicIPAddress)) || !idEqual(subnetID(pa.Subnet), subnetID(pb.Subnet)) {
		return false
	}
	if pb.Subnet == nil {
		return true
	}
	if ptr.Deref(pb.PrivateIPAllocationMethod, "") == armnetwork.IPAllocationMethodStatic {
		return ptr.Deref(pa.PrivateIPAllocationMethod, "") == armnetwork.IPAllocationMethodStatic &&
			ptr.Deref(pa.PrivateIPAddress, "") == ptr.Deref(pb.PrivateIPAddress, "")
	}
	// No address asked for: whatever the frontend has is kept, static or
	// dynamic (an internal Service that moved between load balancers keeps
	// its address as a static one; rewriting it would risk losing it).
	return true
}

func ruleEqual(a, b *armnetwork.LoadBalancingRule) bool {
	pa, pb := a.Properties, b.Properties
	if pa == nil || pb == nil {
		return pa == pb
	}
	return ptr.Deref(pa.Protocol, "") == ptr.Deref(pb.Protocol, "") &&
		ptr.Deref(pa.FrontendPort, 0) == ptr.Deref(pb.FrontendPort, 0) &&
		ptr.Deref(pa.BackendPort, 0) == ptr.Deref(pb.BackendPort, 0) &&
		idEqual(ptrID(pa.FrontendIPConfiguration), ptrID(pb.FrontendIPConfiguration)) &&
		idEqual(ptrID(pa.BackendAddressPool), ptrID(pb.BackendAddressPool)) &&
		idEqual(ptrID(pa.Probe), ptrID(pb.Probe)) &&
		ptr.Deref(pa.EnableFloatingIP, false) == ptr.Deref(pb.EnableFloatingIP, false) &&
		ptr.Deref(pa.EnableTCPReset, false) == ptr.Deref(pb.EnableTCPReset, false) &&
		ptr.Deref(pa.DisableOutboundSnat, false) == ptr.Deref(pb.DisableOutboundSnat, false) &&
		strings.EqualFold(string(ptr.Deref(pa.LoadDistribution, armnetwork.LoadDistributionDefault)),
			string(ptr.Deref(pb.LoadDistribution, armnetwork.LoadDistributionDefault))) &&
		optionalEqual(pa.IdleTimeoutInMinutes, pb.IdleTimeoutInMinutes, 4)
}

func probeEqual(a, b *armnetwork.Probe) bool {
	pa, pb := a.Properties, b.Properties
	if pa == nil || pb == nil {
		return pa == pb
	}
	return strings.EqualFold(string(ptr.Deref(pa.Protocol, "")), string(ptr.Deref(pb.Protocol, ""))) &&
		ptr.Deref(pa.Port, 0) == ptr.Deref(pb.Port, 0) &&
		ptr.Deref(pa.RequestPath, "") == ptr.Deref(pb.RequestPath, "") &&
		optionalEqual(pa.IntervalInSeconds, pb.IntervalInSeconds, 15) &&
		optionalEqual(pa.NumberOfProbes, pb.NumberOfProbes, 2)
}

// optionalEqual treats an unset desired value as Azure's default.
func optionalEqual(have, want *int32, def int32) bool {
	h, w := def, def
	if have != nil {
		h = *have
	}
	if want != nil {
		w = *want
	}
	return h == w
}

func idEqual(a, b string) bool { return strings.EqualFold(a, b) }

func ptrID(s *armnetwork.SubResource) string {
	if s == nil {
		return ""
	}
	return ptr.Deref(s.ID, "")
}

func subID(p *armnetwork.PublicIPAddress) string {
	if p == nil {
		return ""
	}
	return ptr.Deref(p.ID, "")
}

func subnetID(s *armnetwork.Subnet) string {
	if s == nil {
		return ""
	}
	return ptr.Deref(s.ID, "")
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

// samePointers reports whether two lists hold the same items (the same
// pointers, in any order): syncOwned keeps the items it leaves as they are.
func samePointers[T any](a, b []*T) bool {
	if len(a) != len(b) {
		return false
	}
	in := make(map[*T]bool, len(a))
	for _, x := range a {
		in[x] = true
	}
	for _, x := range b {
		if !in[x] {
			return false
		}
	}
	return true
}
