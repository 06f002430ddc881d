package emulator

import (
	"net/http"
	"net/netip"
	"strings"
)

// normNICConfigs validates scale set style network interface
// configurations (a scale set model's networkProfile, a scale set VM's
// networkProfileConfiguration) and returns them with Compute's defaults.
// Every ip configuration must name an existing subnet in loc; the pools it
// lists must exist and accept ip configurations (see checkPoolRefs) of the
// VM set scope.
func (wc *writeCtx) normNICConfigs(arr []any, path, loc, owner string, scope *vmSetScope) ([]any, *armError) {
	out := make([]any, 0, len(arr))
	primaries := 0
	ae := eachNamed(arr, path, "Network interface configuration", func(name, pp string, props obj) *armError {
		prim, _, err := getBool(props, "primary", pp)
		if err != nil {
			return errInvalidParameter(pp+".primary", "%v", err)
		}
		if prim {
			primaries++
		}
		for _, k := range []string{"enableAcceleratedNetworking", "disableTcpStateTracking", "enableIPForwarding"} {
			if _, _, err := getBool(props, k, pp); err != nil {
				return errInvalidParameter(pp+"."+k, "%v", err)
			}
			setDefault(props, k, false)
		}
		setDefault(props, "dnsSettings", obj{"dnsServers": []any{}})
		ipcs, has, err := getArr(props, "ipConfigurations", pp)
		if err != nil || !has || len(ipcs) == 0 {
			return errInvalidParameter(pp+".ipConfigurations", "Network interface configuration '%s' needs at least one ip configuration.", name)
		}
		nipcs, ae := wc.normScaleSetIPConfigs(ipcs, pp+".ipConfigurations", loc, owner+"/networkInterfaces/"+name, scope)
		if ae != nil {
			return ae
		}
		props["ipConfigurations"] = nipcs
		out = append(out, obj{"name": name, "properties": props})
		return nil
	})
	if ae != nil {
		return nil, ae
	}
	if len(out) > 1 && primaries != 1 {
		return nil, errInvalidParameter(path, "Exactly one network interface configuration must be primary when there are %d.", len(out))
	}
	return out, nil
}

func (wc *writeCtx) normScaleSetIPConfigs(arr []any, path, loc, owner string, scope *vmSetScope) ([]any, *armError) {
	out := make([]any, 0, len(arr))
	primaries, v4 := 0, 0
	ae := eachNamed(arr, path, "Ip configuration", func(name, pp string, props obj) *armError {
		ver, ae := enumProp(props, "privateIPAddressVersion", pp, "IPv4", "IPv4", "IPv6")
		if ae != nil {
			return errInvalidParameter(pp+".privateIPAddressVersion", "privateIPAddressVersion must be IPv4 or IPv6.")
		}
		if ver == "IPv4" {
			v4++
		}
		if prim, _, err := getBool(props, "primary", pp); err != nil {
			return errInvalidParameter(pp+".primary", "%v", err)
		} else if prim {
			primaries++
		}
		subnetID, has, err := getRef(props, "subnet", pp)
		if err != nil || !has {
			return errInvalidParameter(pp+".subnet", "Ip configuration '%s' must reference a subnet.", name)
		}
		vv, sub := wc.lookupChild(subnetID, "virtualNetworks", "subnets")
		if sub == nil || stringOf(vv.doc["location"]) != loc {
			return errInvalidReference(subnetID, owner+"/ipConfigurations/"+name)
		}
		if _, ok := subnetPrefix(propsOf(sub), ver == "IPv6"); !ok {
			return errInvalidParameter(pp+".subnet", "Subnet %s has no %s address prefix for ip configuration '%s'.", subnetID, ver, name)
		}
		props["subnet"] = ref(stringOf(sub["id"]))
		ids, has, err := getRefList(props, "loadBalancerBackendAddressPools", pp)
		if err != nil {
			return errInvalidParameter(pp+".loadBalancerBackendAddressPools", "%v", err)
		}
		if has {
			canon, ae := wc.checkPoolRefs(ids, owner+"/ipConfigurations/"+name, scope)
			if ae != nil {
				return ae
			}
			props["loadBalancerBackendAddressPools"] = refList(canon)
		}
		out = append(out, obj{"name": name, "properties": props})
		return nil
	})
	if ae != nil {
		return nil, ae
	}
	if v4 > 1 && primaries != 1 {
		return nil, errInvalidParameter(path, "Exactly one ip configuration must be primary when there are several.")
	}
	return out, nil
}

// nicConfigsPools lists every pool the configurations' ip configurations
// list.
func nicConfigsPools(cfgs []any) []string {
	var out []string
	for _, c := range cfgs {
		for _, ic := range asList(propsOf(c.(obj))["ipConfigurations"]) {
			for _, r := range asList(propsOf(ic.(obj))["loadBalancerBackendAddressPools"]) {
				out = append(out, stringOf(r.(obj)["id"]))
			}
		}
	}
	return out
}

// modelNICConfigs returns a scale set model's network interface
// configurations.
func modelNICConfigs(doc obj) []any {
	vp, _ := propsOf(doc)["virtualMachineProfile"].(obj)
	np, _ := vp["networkProfile"].(obj)
	return asList(np["networkInterfaceConfigurations"])
}

// modelPools lists the pools a scale set model lists.
func modelPools(doc obj) []string { return nicConfigsPools(modelNICConfigs(doc)) }

// instanceNICConfigs returns a scale set VM's network interface
// configurations.
func instanceNICConfigs(doc obj) []any {
	npc, _ := propsOf(doc)["networkProfileConfiguration"].(obj)
	return asList(npc["networkInterfaceConfigurations"])
}

// instancePoolRefs is the pool membership of a scale set VM: each of its ip
// configurations, by the id pools show, with the pools it lists.
func instancePoolRefs(rg, vmss, instance, vmID string, cfgs []any) poolRefs {
	r := newPoolRefs()
	for _, c := range cfgs {
		co := c.(obj)
		nic := stringOf(co["name"])
		for _, ic := range asList(propsOf(co)["ipConfigurations"]) {
			ico := ic.(obj)
			ipc := stringOf(ico["name"])
			var pools []string
			for _, p := range asList(propsOf(ico)["loadBalancerBackendAddressPools"]) {
				pools = append(pools, stringOf(p.(obj)["id"]))
			}
			id := vmID + "/networkInterfaces/" + nic + "/ipConfigurations/" + ipc
			r.add(id, rg+"_"+vmss+"_"+instance+"_"+nic+ipc, pools)
		}
	}
	return r
}

// allocScaleSetIPs gives every ip configuration of cfgs a private address
// (keeping those in old that still fit) and returns the address map.
func (wc *writeCtx) allocScaleSetIPs(cfgs []any, old map[string]string, owner string) (map[string]string, *armError) {
	out := map[string]string{}
	for _, c := range cfgs {
		co := c.(obj)
		for _, ic := range asList(propsOf(co)["ipConfigurations"]) {
			ico := ic.(obj)
			key := strings.ToLower(stringOf(co["name"])) + "/" + strings.ToLower(stringOf(ico["name"]))
			props := propsOf(ico)
			subnetID := stringOf(props["subnet"].(obj)["id"])
			v6 := stringOf(props["privateIPAddressVersion"]) == "IPv6"
			_, sub := wc.lookupChild(subnetID, "virtualNetworks", "subnets")
			if sub == nil {
				return nil, errInvalidReference(subnetID, owner)
			}
			sp, _ := subnetPrefix(propsOf(sub), v6)
			if a, err := netip.ParseAddr(old[key]); err == nil && sp.Contains(a) {
				out[key] = a.String()
				continue
			}
			used := wc.subnetUsage(subnetID)
			a, ok := privateAlloc(sp, used)
			if !ok {
				return nil, nrpError(http.StatusBadRequest, "SubnetIsFull",
					"Subnet %s with address prefix %s does not have enough capacity for 1 IP address.", subnetID, sp)
			}
			used[a] = true
			out[key] = a.String()
		}
	}
	return out, nil
}

// subnetUsage returns the addresses in use in a subnet, computed once per
// write and updated as the write allocates.
func (wc *writeCtx) subnetUsage(subnetID string) map[netip.Addr]bool {
	k := strings.ToLower(subnetID)
	if u, ok := wc.subnetUsed[k]; ok {
		return u
	}
	if wc.subnetUsed == nil {
		wc.subnetUsed = map[string]map[netip.Addr]bool{}
	}
	u := wc.usedPrivateIPs(subnetID)
	wc.subnetUsed[k] = u
	return u
}

// instanceIPConfigs renders the ip configurations of a scale set VM's
// network interfaces as NRP shows them (ids, addresses, subnets, pools).
func instanceIPConfigs(v *version) []obj {
	st, _ := v.ext.(*vmState)
	vmID := stringOf(v.doc["id"])
	var out []obj
	for _, c := range instanceNICConfigs(v.doc) {
		co := c.(obj)
		nic := stringOf(co["name"])
		for _, ic := range asList(propsOf(co)["ipConfigurations"]) {
			ico := ic.(obj)
			props := propsOf(ico)
			cp := obj{
				"privateIPAllocationMethod": "Dynamic",
				"subnet":                    props["subnet"],
				"primary":                   props["primary"] == true || len(asList(propsOf(co)["ipConfigurations"])) == 1,
				"privateIPAddressVersion":   props["privateIPAddressVersion"],
			}
			if st != nil {
				if a := st.ips[strings.ToLower(nic)+"/"+strings.ToLower(stringOf(ico["name"]))]; a != "" {
					cp["privateIPAddress"] = a
				}
			}
			if pools, ok := props["loadBalancerBackendAddressPools"]; ok {
				cp["loadBalancerBackendAddressPools"] = pools
			}
			out = append(out, obj{
				"name": stringOf(ico["name"]), "id": vmID + "/networkInterfaces/" + nic + "/ipConfigurations/" + stringOf(ico["name"]),
				"properties": cp,
			})
		}
	}
	return out
}

// eachNamed checks arr as a list of named objects (each an object with a
// name unique in the list, case-insensitively, and optional properties) and
// calls fn with each one's name, the path of its properties and a deep copy
// of them. kind words the errors ("Ip configuration"); the first error
// ends the walk.
func eachNamed(arr []any, path, kind string, fn func(name, pp string, props obj) *armError) *armError {
	seen := map[string]bool{}
	for i, el := range arr {
		p := indexPath(path, i)
		c, ok := el.(map[string]any)
		if !ok {
			return errInvalidParameter(p, "%s must be an object, got %s.", p, jsonKind(el))
		}
		name, _, err := getStr(c, "name", p)
		if err != nil || name == "" {
			return errInvalidParameter(p+".name", "%s %s needs a name.", kind, p)
		}
		if seen[strings.ToLower(name)] {
			return errInvalidParameter(p+".name", "%s name '%s' is used twice.", kind, name)
		}
		seen[strings.ToLower(name)] = true
		props, err := getObj(c, "properties", p)
		if err != nil {
			return errInvalidParameter(p+".properties", "%v", err)
		}
		if props == nil {
			props = obj{}
		}
		if ae := fn(name, p+".properties", deepCopy(props).(obj)); ae != nil {
			return ae
		}
	}
	return nil
}
