package emulator

import (
	"net/http"
	"strings"
)

// NIC-based backend pool membership, as NRP keeps it: an ip configuration
// (of a NIC, or of a scale set VM's network interface) that lists a pool
// appears in the pool's backendIPConfigurations and as a NIC-derived
// loadBalancerBackendAddresses entry (no ipAddress, a read-only
// networkInterfaceIPConfiguration reference). The pool side is stored in
// the load balancer's document, so a membership change is a new version of
// the load balancer (with a new etag), and pool PUTs are validated against
// it: they may change nothing of a NIC-derived entry but its adminState.

// memberChange is one ip configuration joining or leaving a pool.
type memberChange struct {
	pool     string // canonical pool id
	ipConfig string // the ip configuration id as pools show it
	name     string // the NIC-derived entry's name
	join     bool
}

// poolRefs is the pools each ip configuration of a resource lists:
// ip configuration id -> canonical pool ids. names gives each ip
// configuration's NIC-derived entry name.
type poolRefs struct {
	pools map[string][]string
	names map[string]string
}

func newPoolRefs() poolRefs {
	return poolRefs{pools: map[string][]string{}, names: map[string]string{}}
}

func (r poolRefs) add(ipConfig, name string, pools []string) {
	r.pools[ipConfig] = pools
	r.names[ipConfig] = name
}

// membershipDiff queues the joins and leaves that move from before to after.
func (wc *writeCtx) membershipDiff(before, after poolRefs) {
	for cfg, pools := range after.pools {
		for _, p := range pools {
			if !containsFold(before.pools[cfg], p) {
				wc.members = append(wc.members, memberChange{pool: p, ipConfig: cfg, name: after.names[cfg], join: true})
			}
		}
	}
	for cfg, pools := range before.pools {
		for _, p := range pools {
			if !containsFold(after.pools[cfg], p) {
				wc.members = append(wc.members, memberChange{pool: p, ipConfig: cfg, join: false})
			}
		}
	}
}

// poolLB splits a pool id into its load balancer id and pool name.
func poolLB(poolID string) (lbID, pool string) {
	i := strings.LastIndex(strings.ToLower(poolID), "/backendaddresspools/")
	if i < 0 {
		return "", ""
	}
	return poolID[:i], poolID[i+len("/backendAddressPools/"):]
}

// flushMembers applies the queued membership changes: one new version per
// load balancer touched.
func (wc *writeCtx) flushMembers() {
	if len(wc.members) == 0 {
		return
	}
	byLB := map[string][]memberChange{}
	var order []string
	for _, m := range wc.members {
		lb, _ := poolLB(m.pool)
		k := strings.ToLower(lb)
		if _, ok := byLB[k]; !ok {
			order = append(order, lb)
		}
		byLB[k] = append(byLB[k], m)
	}
	wc.members = nil
	for _, lbID := range order {
		en, v := wc.lookupKind(lbID, "loadBalancers")
		if v == nil {
			continue // the load balancer went away: nothing to show
		}
		doc := shallowCopy(v.doc)
		props := shallowCopy(propsOf(v.doc))
		pools := append([]any(nil), asList(props["backendAddressPools"])...)
		changed := false
		for i, p := range pools {
			po := p.(obj)
			pid := stringOf(po["id"])
			var mine []memberChange
			for _, m := range byLB[strings.ToLower(lbID)] {
				if strings.EqualFold(m.pool, pid) {
					mine = append(mine, m)
				}
			}
			if len(mine) == 0 {
				continue
			}
			np := shallowCopy(po)
			pp := shallowCopy(propsOf(po))
			refs := append([]any(nil), asList(pp["backendIPConfigurations"])...)
			addrs := append([]any(nil), asList(pp["loadBalancerBackendAddresses"])...)
			for _, m := range mine {
				refs, addrs = applyMember(refs, addrs, m)
			}
			pp["backendIPConfigurations"] = refs
			pp["loadBalancerBackendAddresses"] = addrs
			np["properties"] = pp
			pools[i] = np
			changed = true
		}
		if !changed {
			continue
		}
		props["backendAddressPools"] = pools
		doc["properties"] = props
		wc.replace(en, doc)
	}
}

// applyMember adds or removes one ip configuration.
func applyMember(refs, addrs []any, m memberChange) ([]any, []any) {
	idx := -1
	for i, r := range refs {
		if strings.EqualFold(stringOf(r.(obj)["id"]), m.ipConfig) {
			idx = i
			break
		}
	}
	aidx := -1
	for i, a := range addrs {
		if strings.EqualFold(nicEntryConfig(a.(obj)), m.ipConfig) {
			aidx = i
			break
		}
	}
	if m.join {
		if idx < 0 {
			refs = append(refs, ref(m.ipConfig))
		}
		if aidx < 0 {
			addrs = append(addrs, obj{"name": m.name, "properties": obj{"networkInterfaceIPConfiguration": ref(m.ipConfig)}})
		}
		return refs, addrs
	}
	if idx >= 0 {
		refs = append(refs[:idx:idx], refs[idx+1:]...)
	}
	if aidx >= 0 {
		addrs = append(addrs[:aidx:aidx], addrs[aidx+1:]...)
	}
	return refs, addrs
}

// nicEntryConfig is the ip configuration a NIC-derived pool entry stands
// for ("" for an IP-based entry).
func nicEntryConfig(a obj) string {
	r, _ := propsOf(a)["networkInterfaceIPConfiguration"].(obj)
	return stringOf(r["id"])
}

// checkPoolRefs validates the pools one ip configuration lists: each must
// exist, be listed once, not hold IP-based addresses, not belong to a sku
// Service load balancer (its members come from a service gateway), not
// belong to a load balancer of another SKU than what the VM set uses
// (scope), and, for a Basic load balancer, not take members from two VM
// sets. It returns the canonical ids.
func (wc *writeCtx) checkPoolRefs(ids []string, owner string, scope *vmSetScope) ([]string, *armError) {
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		lbv, pool := wc.lookupChild(id, "loadBalancers", "backendAddressPools")
		if pool == nil {
			return nil, errInvalidReference(id, owner)
		}
		canon := stringOf(pool["id"])
		if containsFold(out, canon) {
			return nil, nrpError(http.StatusBadRequest, "DuplicateIpConfigurationReferenceOnBackendAddressPool",
				"Found duplicate reference to backend address pool %s in ip configuration %s.", canon, owner)
		}
		for _, a := range asList(propsOf(pool)["loadBalancerBackendAddresses"]) {
			if stringOf(propsOf(a.(obj))["ipAddress"]) != "" {
				return nil, nrpError(http.StatusBadRequest, "CannotMixIPBasedAddressesAndIPConfigurationsOnLoadBalancerBackendAddressPool",
					"Ip configuration %s cannot reference backend address pool %s, which holds IP address based backend addresses. A backend address pool holds either ip configurations or IP addresses.", owner, canon)
			}
		}
		sku := docSku(lbv.doc)
		if sku == lbSKUService {
			return nil, nrpError(http.StatusBadRequest, "BackendAddressesNotSupportedOnServiceSkuLoadBalancer",
				"Ip configuration %s cannot reference backend address pool %s of a sku Service load balancer, which takes its members from a service gateway.", owner, canon)
		}
		lbID, _ := poolLB(canon)
		if ae := scope.use(lbID, sku, owner); ae != nil {
			return nil, ae
		}
		if sku == "Basic" {
			if ae := wc.checkBasicMembers(lbv.doc, scope); ae != nil {
				return nil, ae
			}
		}
		out = append(out, canon)
	}
	return out, nil
}

// poolMembers lists the ip configurations a pool document holds.
func poolMembers(pool obj) []string {
	var out []string
	for _, r := range asList(propsOf(pool)["backendIPConfigurations"]) {
		out = append(out, stringOf(r.(obj)["id"]))
	}
	return out
}

// scaleSetsUsingPool returns the ids of scale sets whose model lists a pool
// of the load balancer lbID (pool "" means any pool).
func (wc *writeCtx) scaleSetsUsingPool(lbID, pool string) []string {
	prefix := strings.ToLower(lbID) + "/backendaddresspools/"
	want := strings.ToLower(pool)
	var out []string
	for _, s := range wc.e.subs {
		for _, g := range s.groups {
			for key, en := range g.resources {
				if !strings.HasPrefix(key, "virtualmachinescalesets/") || en.cur == nil || en.cur.phaseAt(wc.now) == phaseGone {
					continue
				}
				for _, p := range modelPools(en.cur.doc) {
					lp := strings.ToLower(p)
					if strings.HasPrefix(lp, prefix) && (want == "" || lp[len(prefix):] == want) {
						out = append(out, stringOf(en.cur.doc["id"]))
						break
					}
				}
			}
		}
	}
	return out
}

// checkPoolsRemovable rejects removing a pool (a pool DELETE, a load
// balancer PUT dropping it, a load balancer DELETE) while a scale set model
// lists it or ip configurations are its members.
func (wc *writeCtx) checkPoolsRemovable(lbID string, pools []obj) *armError {
	for _, p := range pools {
		name := stringOf(p["name"])
		if vmss := wc.scaleSetsUsingPool(lbID, name); len(vmss) > 0 {
			return nrpError(http.StatusBadRequest, "LoadBalancerInUseByVirtualMachineScaleSet",
				"Cannot delete load balancer %s since its child resources %s are in use by virtual machine scale set %s.", lbID, stringOf(p["id"]), vmss[0])
		}
		if m := poolMembers(p); len(m) > 0 {
			return nrpError(http.StatusBadRequest, "InUseBackendAddressPoolCannotBeDeleted",
				"Backend address pool %s is in use by ip configuration %s and cannot be deleted.", stringOf(p["id"]), m[0])
		}
	}
	return nil
}
