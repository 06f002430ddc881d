package emulator

import (
	"net/http"
	"net/netip"
	"strings"
)

func init() {
	registerKind(&kindSpec{
		typ: "publicIPAddresses", fullType: "Microsoft.Network/publicIPAddresses",
		hideOnCreate: []string{"ipAddress"},
		normalize:    normalizePublicIP,
		checkDelete:  checkDeletePublicIP,
		onDelete:     onDeletePublicIP,
	})
	registerKind(&kindSpec{
		typ: "publicIPPrefixes", fullType: "Microsoft.Network/publicIPPrefixes",
		hideOnCreate: []string{"ipPrefix"},
		normalize:    normalizePublicIPPrefix,
		checkDelete:  checkDeletePublicIPPrefix,
		onDelete:     onDeletePublicIPPrefix,
	})
}

// enumValue canonicalizes v against allowed values (case-insensitive).
func enumValue(v string, allowed ...string) (string, bool) {
	for _, a := range allowed {
		if strings.EqualFold(a, v) {
			return a, true
		}
	}
	return "", false
}

// enumProp reads an optional enum property, canonicalizing its case.
func enumProp(props obj, key, path, def string, allowed ...string) (string, *armError) {
	v, ok, err := getStr(props, key, path)
	if err != nil {
		return "", errBadShape(err)
	}
	if !ok || v == "" {
		if def != "" {
			props[key] = def
		}
		return def, nil
	}
	c, valid := enumValue(v, allowed...)
	if !valid {
		return "", errBadShape(&fieldError{joinPath(path, key), "value '" + v + "' is not one of " + strings.Join(allowed, ", ")})
	}
	props[key] = c
	return c, nil
}

func normalizePublicIP(wc *writeCtx, in obj, name string, old *version) (obj, *armError) {
	doc, props, ae := baseDoc(wc, kinds["publicipaddresses"], in, name, old, true)
	if ae != nil {
		return nil, ae
	}
	sku, ae := normSku(in, []string{"Basic", "Standard", "StandardV2"}, "Basic")
	if ae != nil {
		return nil, ae
	}
	doc["sku"] = sku
	id := doc["id"].(string)
	version, ae := enumProp(props, "publicIPAddressVersion", "properties", "IPv4", "IPv4", "IPv6")
	if ae != nil {
		return nil, ae
	}
	standard := sku["name"] == "Standard" || sku["name"] == "StandardV2"
	defAlloc := "Dynamic"
	if standard {
		defAlloc = "Static"
	}
	alloc, ae := enumProp(props, "publicIPAllocationMethod", "properties", defAlloc, "Static", "Dynamic")
	if ae != nil {
		return nil, ae
	}
	if standard && alloc != "Static" {
		return nil, nrpError(http.StatusBadRequest, "StandardSkuPublicIPAddressesMustBeStatic",
			"%s sku publicIp %s must have AllocationMethod set to Static.", sku["name"], id)
	}
	if _, _, err := getInt(props, "idleTimeoutInMinutes", "properties"); err != nil {
		return nil, errBadShape(err)
	}
	setDefault(props, "idleTimeoutInMinutes", 4)
	if _, _, err := getArr(props, "ipTags", "properties"); err != nil {
		return nil, errBadShape(err)
	}
	setDefault(props, "ipTags", []any{})
	if standard {
		setDefault(props, "ddosSettings", obj{"protectionMode": "VirtualNetworkInherited"})
	}
	if dns, err := getObj(props, "dnsSettings", "properties"); err != nil {
		return nil, errBadShape(err)
	} else if dns != nil {
		dns = shallowCopy(dns)
		label, _, err := getStr(dns, "domainNameLabel", "properties.dnsSettings")
		if err != nil {
			return nil, errBadShape(err)
		}
		delete(dns, "fqdn")
		if label != "" {
			dns["fqdn"] = strings.ToLower(label) + "." + doc["location"].(string) + ".cloudapp.azure.com"
		}
		props["dnsSettings"] = dns
	}
	prefixID, hasPrefix, err := getRef(props, "publicIPPrefix", "properties")
	if err != nil {
		return nil, errBadShape(err)
	}
	var prefixBlock netip.Prefix
	if hasPrefix {
		_, pv := wc.lookupKind(prefixID, "publicIPPrefixes")
		if pv == nil {
			return nil, errInvalidReference(prefixID, id)
		}
		pp := propsOf(pv.doc)
		if s, _ := pp["ipPrefix"].(string); s != "" {
			prefixBlock, _ = netip.ParsePrefix(s)
		}
		if pver := stringOf(pp["publicIPAddressVersion"]); pver != "" && pver != version {
			return nil, nrpError(http.StatusBadRequest, "PublicIPAddressVersionDoesNotMatchPublicIPPrefixVersion",
				"Public IP address %s of version %s cannot be allocated from public IP prefix %s of version %s.", id, version, pv.doc["id"], pver)
		}
		props["publicIPPrefix"] = ref(pv.doc["id"].(string))
	}
	var oldZones []string
	if old != nil {
		oldZones = zoneList(old.doc)
	}
	if ae := checkZones(id, "Microsoft.Network/publicIPAddresses", stringOf(doc["location"]), zoneList(doc), oldZones, old != nil); ae != nil {
		return nil, ae
	}
	// Read-only and server-owned members.
	delete(props, "ipAddress")
	delete(props, "ipConfiguration")
	delete(props, "natGateway")
	if old != nil {
		op := propsOf(old.doc)
		oldSku, _ := old.doc["sku"].(obj)
		if ae := checkPublicIPSkuChange(id, stringOf(oldSku["name"]), stringOf(sku["name"]), op); ae != nil {
			return nil, ae
		}
		if ov, _ := op["publicIPAddressVersion"].(string); ov != "" && ov != version {
			return nil, nrpError(http.StatusBadRequest, "PublicIPAddressVersionCannotBeChanged",
				"IP version of public IP address %s cannot be changed from %s to %s.", id, ov, version)
		}
		for _, k := range []string{"ipAddress", "ipConfiguration", "natGateway"} {
			if v, ok := op[k]; ok {
				props[k] = v
			}
		}
		// A Dynamic address exists only while the public IP is associated:
		// switching an unassociated one to Dynamic releases it.
		if alloc == "Dynamic" && props["ipConfiguration"] == nil && props["natGateway"] == nil {
			if s, _ := props["ipAddress"].(string); s != "" {
				if a, err := netip.ParseAddr(s); err == nil {
					wc.after(func() { wc.e.ips.pool(a.Is6()).release(a) })
				}
				delete(props, "ipAddress")
			}
		}
	}
	keepGUID(wc, props, old)
	if _, has := props["ipAddress"]; !has && (alloc == "Static" || props["ipConfiguration"] != nil) {
		pool := wc.e.ips.pool(version == "IPv6")
		var a netip.Addr
		var ok bool
		if prefixBlock.IsValid() {
			if a, ok = pool.allocIn(prefixBlock); !ok {
				// The code of a public IP prefix without a free address
				// (the VM scale set variant is
				// PublicIpPrefixOutOfIpAddressesForVMScaleSet).
				return nil, nrpError(http.StatusBadRequest, "PublicIpPrefixOutOfIpAddresses",
					"Public IP prefix %s has no free IP address left for public IP address %s.", prefixID, id)
			}
		} else {
			a, ok = pool.alloc()
		}
		if !ok {
			return nil, nrpError(http.StatusBadRequest, "PublicIPCountLimitReached",
				"Cannot create more than the emulator's range of public IP addresses for %s (range exhausted).", version)
		}
		props["ipAddress"] = a.String()
	}
	doc["properties"] = props
	return doc, nil
}

// checkPublicIPSkuChange applies ARM's rules for changing the SKU of a
// public IP (old and new SKU names; op: the stored properties):
//   - Basic to Standard (the upgrade) only while the public IP is not
//     associated (PublicIPAddressInUseCannotUpdate, as recorded in
//     MicrosoftDocs/azure-docs#76317) and only when it is already Static
//     (a Dynamic one has no address to keep); the address is kept;
//   - Standard to Basic: refused (the upgrade cannot be reversed);
//   - any other change: refused.
//
// Only the in-use code is proven; the others are the emulator's strictest
// reading (docs/emulator.md).
func checkPublicIPSkuChange(id, from, to string, op obj) *armError {
	if from == "" || from == to {
		return nil
	}
	switch {
	case from == "Basic" && to == "Standard":
		for _, k := range []string{"ipConfiguration", "natGateway"} {
			if r, ok := op[k].(obj); ok {
				return nrpError(http.StatusBadRequest, "PublicIPAddressInUseCannotUpdate",
					"Public IP address %s is in use by ipconfig %s and cannot be updated.", id, stringOf(r["id"]))
			}
		}
		if stringOf(op["publicIPAllocationMethod"]) != "Static" {
			return nrpError(http.StatusBadRequest, "DynamicPublicIPAddressCannotBeUpgraded",
				"Public IP address %s has the Basic sku and Dynamic allocation; only a Static Basic public IP address can be upgraded to the Standard sku. Change its allocation method to Static first.", id)
		}
		return nil
	case from == "Standard" && to == "Basic":
		return nrpError(http.StatusBadRequest, "PublicIPAddressSkuCannotBeDowngraded",
			"Public IP address %s has the Standard sku; it cannot be changed back to Basic.", id)
	default:
		return nrpError(http.StatusBadRequest, "PublicIPAddressSkuCannotBeChanged",
			"Sku of public IP address %s cannot be changed from %s to %s.", id, from, to)
	}
}

func checkDeletePublicIP(wc *writeCtx, v *version) *armError {
	p := propsOf(v.doc)
	id, _ := v.doc["id"].(string)
	for _, k := range []string{"ipConfiguration", "natGateway"} {
		if r, ok := p[k].(obj); ok {
			user, _ := r["id"].(string)
			return nrpError(http.StatusBadRequest, "PublicIPAddressInUseCannotBeDeleted",
				"Public IP address %s can not be deleted since it is still allocated to resource %s. In order to delete the public IP, disassociate/detach the Public IP address from the resource.  To learn how to do this, see aka.ms/deletepublicip.",
				id, user)
		}
	}
	return nil
}

func onDeletePublicIP(wc *writeCtx, v *version) {
	p := propsOf(v.doc)
	if s, _ := p["ipAddress"].(string); s != "" {
		if a, err := netip.ParseAddr(s); err == nil {
			wc.e.ips.pool(a.Is6()).release(a)
		}
	}
}

// setPublicIPConfig records (ipConfigID != "") or clears the
// ipConfiguration back-reference of a public IP, allocating or releasing a
// Dynamic address as ARM does on association.
func (wc *writeCtx) setPublicIPConfig(pipID, ipConfigID string) {
	en, v := wc.lookupKind(pipID, "publicIPAddresses")
	if v == nil {
		return
	}
	p := propsOf(v.doc)
	cur := ""
	if r, ok := p["ipConfiguration"].(obj); ok {
		cur, _ = r["id"].(string)
	}
	if strings.EqualFold(cur, ipConfigID) {
		return
	}
	np := shallowCopy(p)
	dynamic := np["publicIPAllocationMethod"] == "Dynamic"
	if ipConfigID == "" {
		delete(np, "ipConfiguration")
		if dynamic {
			if s, _ := np["ipAddress"].(string); s != "" {
				if a, err := netip.ParseAddr(s); err == nil {
					wc.e.ips.pool(a.Is6()).release(a)
				}
			}
			delete(np, "ipAddress")
		}
	} else {
		np["ipConfiguration"] = ref(ipConfigID)
		if _, has := np["ipAddress"]; !has {
			if a, ok := wc.e.ips.pool(np["publicIPAddressVersion"] == "IPv6").alloc(); ok {
				np["ipAddress"] = a.String()
			}
		}
	}
	doc := shallowCopy(v.doc)
	doc["properties"] = np
	wc.replace(en, doc)
}

func normalizePublicIPPrefix(wc *writeCtx, in obj, name string, old *version) (obj, *armError) {
	doc, props, ae := baseDoc(wc, kinds["publicipprefixes"], in, name, old, true)
	if ae != nil {
		return nil, ae
	}
	sku, ae := normSku(in, []string{"Standard"}, "Standard")
	if ae != nil {
		return nil, ae
	}
	doc["sku"] = sku
	id := doc["id"].(string)
	version, ae := enumProp(props, "publicIPAddressVersion", "properties", "IPv4", "IPv4", "IPv6")
	if ae != nil {
		return nil, ae
	}
	plen, has, err := getInt(props, "prefixLength", "properties")
	if err != nil {
		return nil, errBadShape(err)
	}
	minLen, maxLen := int64(28), int64(31)
	if version == "IPv6" {
		minLen, maxLen = 124, 127
	}
	if !has || plen < minLen || plen > maxLen {
		return nil, nrpError(http.StatusBadRequest, "InvalidPublicIPPrefixLength",
			"Public IP prefix %s has an invalid prefixLength; %s prefixes must be between /%d and /%d.", id, version, minLen, maxLen)
	}
	props["prefixLength"] = plen
	setDefault(props, "ipTags", []any{})
	delete(props, "ipPrefix")
	delete(props, "publicIPAddresses")
	if old != nil {
		op := propsOf(old.doc)
		if op["prefixLength"] != props["prefixLength"] || op["publicIPAddressVersion"] != version {
			return nil, nrpError(http.StatusBadRequest, "PublicIPPrefixCannotBeResized",
				"The prefix length or IP version of public IP prefix %s cannot be changed.", id)
		}
		props["ipPrefix"] = op["ipPrefix"]
	}
	keepGUID(wc, props, old)
	if props["ipPrefix"] == nil {
		blk, ok := wc.e.ips.pool(version == "IPv6").allocPrefix(int(plen))
		if !ok {
			return nil, nrpError(http.StatusBadRequest, "PublicIPPrefixCountLimitReached",
				"No free /%d block left in the emulator's public %s range.", plen, version)
		}
		props["ipPrefix"] = blk.String()
	}
	doc["properties"] = props
	return doc, nil
}

func checkDeletePublicIPPrefix(wc *writeCtx, v *version) *armError {
	id, _ := v.doc["id"].(string)
	for _, s := range wc.e.subs {
		for _, g := range s.groups {
			for key, en := range g.resources {
				if !strings.HasPrefix(key, "publicipaddresses/") || en.cur == nil || en.cur.phaseAt(wc.now) == phaseGone {
					continue
				}
				if r, ok := propsOf(en.cur.doc)["publicIPPrefix"].(obj); ok && strings.EqualFold(r["id"].(string), id) {
					return nrpError(http.StatusBadRequest, "PublicIpPrefixInUseCannotBeDeleted",
						"Public IP prefix %s cannot be deleted since it is in use by public IP address %s.", id, en.cur.doc["id"])
				}
			}
		}
	}
	return nil
}

func onDeletePublicIPPrefix(wc *writeCtx, v *version) {
	p := propsOf(v.doc)
	if s, _ := p["ipPrefix"].(string); s != "" {
		if b, err := netip.ParsePrefix(s); err == nil {
			wc.e.ips.pool(b.Addr().Is6()).releasePrefix(b)
		}
	}
}
