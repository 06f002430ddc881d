package emulator

import (
	"net/http"
	"strings"
)

// SKU rules that look beyond one resource: ARM judges the load balancers
// and public IPs an ip configuration uses together with those of every
// other VM of its VM set (scale set, availability set).
//
//   - Basic and Standard must not be mixed within a VM set
//     (DifferentSkuLoadBalancersAndPublicIPAddressNotAllowed): a scale set
//     model, its VMs, the VMs of an availability set and their NICs are one
//     set.
//   - A Basic load balancer takes its members from one VM set only
//     (VmIsNotInSameAvailabilitySetAsLb, the code and message of the
//     Azure SDK samples' recorded error).

// vmSetScope is the VM set of the resource being written and the SKU of
// every load balancer and public IP the set uses.
type vmSetScope struct {
	// set is the lower-cased id of the VM set: a scale set, an availability
	// set, else the VM, else the NIC.
	set string
	// vm is the VM (or scale set VM, or scale set) named in errors.
	vm string
	// uses maps lower-cased load balancer and public IP ids to their SKU
	// class (Basic or Standard) and a user of it.
	uses map[string]skuUse
	// fill adds what the rest of the set uses; run once, on first use.
	fill func(s *vmSetScope)
}

type skuUse struct{ class, id, user string }

// skuClass folds SKUs into the two that must not mix.
func skuClass(sku string) string {
	if sku == "Basic" || sku == "" {
		return "Basic"
	}
	return "Standard"
}

func (s *vmSetScope) ensureFilled() {
	if s.uses == nil {
		s.uses = map[string]skuUse{}
	}
	if s.fill != nil {
		f := s.fill
		s.fill = nil
		f(s)
	}
}

// record notes a use without checking (what the rest of the set uses).
func (s *vmSetScope) record(id, sku, user string) {
	k := strings.ToLower(id)
	if _, ok := s.uses[k]; !ok {
		s.uses[k] = skuUse{class: skuClass(sku), id: id, user: user}
	}
}

// use checks that a load balancer or public IP of the SKU may be used by
// the set, and records it.
func (s *vmSetScope) use(id, sku, user string) *armError {
	s.ensureFilled()
	class := skuClass(sku)
	for k, u := range s.uses {
		if k != strings.ToLower(id) && u.class != class {
			return nrpError(http.StatusBadRequest, "DifferentSkuLoadBalancersAndPublicIPAddressNotAllowed",
				"Different basic sku and standard sku load balancer or public Ip resources in availability set or scale set is not allowed: %s (%s, used by %s) and %s (%s, used by %s).",
				u.id, u.class, u.user, id, class, user)
		}
	}
	s.record(id, sku, user)
	return nil
}

// recordPools notes the load balancers of the pools ids (skipping pools
// that no longer exist).
func (wc *writeCtx) recordPools(s *vmSetScope, ids []string, user string) {
	for _, id := range ids {
		if lbv, pool := wc.lookupChild(id, "loadBalancers", "backendAddressPools"); pool != nil {
			lbID, _ := poolLB(stringOf(pool["id"]))
			s.record(lbID, docSku(lbv.doc), user)
		}
	}
}

// recordPIP notes a public IP (skipping one that no longer exists).
func (wc *writeCtx) recordPIP(s *vmSetScope, id, user string) {
	if _, v := wc.lookupKind(id, "publicIPAddresses"); v != nil {
		s.record(stringOf(v.doc["id"]), docSku(v.doc), user)
	}
}

func docSku(doc obj) string {
	s, _ := doc["sku"].(obj)
	return stringOf(s["name"])
}

// scaleSetScope is the scope of a scale set's model (except "") or of one
// of its VMs (except: that VM's id, left out of the fill): the model, the
// scale set VMs and the standalone VMs that name the scale set (Flexible).
func (wc *writeCtx) scaleSetScope(vmssID, vm, except string) *vmSetScope {
	return &vmSetScope{set: strings.ToLower(vmssID), vm: vm, fill: func(s *vmSetScope) {
		name := lastSegment(vmssID)
		if except != "" {
			if en := wc.g.resources[resourceKey(typeVMSS, name)]; en != nil && en.cur != nil && en.cur.phaseAt(wc.now) != phaseGone {
				wc.recordPools(s, modelPools(en.cur.doc), vmssID)
			}
		}
		prefix := "vmssvm/" + strings.ToLower(name) + "/"
		for key, en := range wc.g.resources {
			if !strings.HasPrefix(key, prefix) || en.cur == nil || en.cur.phaseAt(wc.now) == phaseGone || en.cur.deleting {
				continue
			}
			id := stringOf(en.cur.doc["id"])
			if strings.EqualFold(id, except) {
				continue
			}
			wc.recordPools(s, nicConfigsPools(instanceNICConfigs(en.cur.doc)), id)
		}
		wc.recordSetVMs(s, "virtualMachineScaleSet", vmssID, "")
	}}
}

// nicScope is the scope of a NIC: the VM set of the VM using it (old, the
// stored NIC, holds the back-reference), the other NICs of that set.
func (wc *writeCtx) nicScope(nicID string, old *version) *vmSetScope {
	s := &vmSetScope{set: strings.ToLower(nicID), vm: nicID}
	if old == nil {
		return s
	}
	r, ok := propsOf(old.doc)["virtualMachine"].(obj)
	if !ok {
		return s
	}
	vmID := stringOf(r["id"])
	s.set, s.vm = strings.ToLower(vmID), vmID
	_, vm := wc.lookupKind(vmID, typeVM)
	if vm == nil {
		return s
	}
	for _, key := range []string{"availabilitySet", "virtualMachineScaleSet"} {
		if r, ok := propsOf(vm.doc)[key].(obj); ok {
			setID := stringOf(r["id"])
			s.set = strings.ToLower(setID)
			s.fill = func(s *vmSetScope) { wc.recordSetVMs(s, key, setID, nicID) }
			return s
		}
	}
	s.fill = func(s *vmSetScope) { wc.recordVMNICs(s, vm.doc, nicID) }
	return s
}

// recordSetVMs notes what the NICs of the standalone VMs whose key
// (availabilitySet, virtualMachineScaleSet) names setID use, except the
// NIC exceptNIC.
func (wc *writeCtx) recordSetVMs(s *vmSetScope, key, setID, exceptNIC string) {
	for k, en := range wc.g.resources {
		if !strings.HasPrefix(k, "virtualmachines/") || en.cur == nil || en.cur.phaseAt(wc.now) == phaseGone || en.cur.deleting {
			continue
		}
		if r, ok := propsOf(en.cur.doc)[key].(obj); ok && strings.EqualFold(stringOf(r["id"]), setID) {
			wc.recordVMNICs(s, en.cur.doc, exceptNIC)
		}
	}
}

// recordVMNICs notes the pools and public IPs of a VM's NICs but one.
func (wc *writeCtx) recordVMNICs(s *vmSetScope, vm obj, exceptNIC string) {
	for _, nid := range vmNICIDs(vm) {
		if strings.EqualFold(nid, exceptNIC) {
			continue
		}
		_, nv := wc.lookupKind(nid, "networkInterfaces")
		if nv == nil {
			continue
		}
		for _, c := range asList(propsOf(nv.doc)["ipConfigurations"]) {
			co := c.(obj)
			cp := propsOf(co)
			var pools []string
			for _, p := range asList(cp["loadBalancerBackendAddressPools"]) {
				pools = append(pools, stringOf(p.(obj)["id"]))
			}
			wc.recordPools(s, pools, stringOf(co["id"]))
			if r, ok := cp["publicIPAddress"].(obj); ok {
				wc.recordPIP(s, stringOf(r["id"]), stringOf(co["id"]))
			}
		}
	}
}

// memberSet is the VM set (lower-cased id) of a pool member: the scale set
// of a scale set VM's ip configuration; for a NIC's, the availability set
// or scale set of its VM, else the VM, else the NIC.
func (wc *writeCtx) memberSet(ipConfig string) string {
	l := strings.ToLower(ipConfig)
	if i := strings.Index(l, "/virtualmachinescalesets/"); i >= 0 {
		rest := l[i+len("/virtualmachinescalesets/"):]
		name, _, _ := strings.Cut(rest, "/")
		return l[:i] + "/virtualmachinescalesets/" + name
	}
	nicID := ipConfig
	if i := strings.Index(l, "/ipconfigurations/"); i >= 0 {
		nicID = ipConfig[:i]
	}
	_, nv := wc.lookupKind(nicID, "networkInterfaces")
	if nv == nil {
		return strings.ToLower(nicID)
	}
	r, ok := propsOf(nv.doc)["virtualMachine"].(obj)
	if !ok {
		return strings.ToLower(nicID)
	}
	vmID := stringOf(r["id"])
	if _, vm := wc.lookupKind(vmID, typeVM); vm != nil {
		for _, key := range []string{"availabilitySet", "virtualMachineScaleSet"} {
			if r, ok := propsOf(vm.doc)[key].(obj); ok {
				return strings.ToLower(stringOf(r["id"]))
			}
		}
	}
	return strings.ToLower(vmID)
}

// checkBasicMembers rejects an ip configuration of another VM set than the
// members of a Basic load balancer already come from.
func (wc *writeCtx) checkBasicMembers(lb obj, s *vmSetScope) *armError {
	for _, p := range asList(propsOf(lb)["backendAddressPools"]) {
		for _, m := range poolMembers(p.(obj)) {
			if wc.memberSet(m) != s.set {
				return nrpError(http.StatusBadRequest, "VmIsNotInSameAvailabilitySetAsLb",
					"Virtual Machine %s is using different Availability Set than other Virtual Machines connected to the Load Balancer(s) %s.", s.vm, stringOf(lb["name"]))
			}
		}
	}
	return nil
}

func lastSegment(id string) string {
	return id[strings.LastIndex(id, "/")+1:]
}
