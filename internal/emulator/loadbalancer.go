package emulator

import (
	"fmt"
	"net/http"
	"net/netip"
	"strings"
)

const (
	lbType       = "Microsoft.Network/loadBalancers"
	frontendType = lbType + "/frontendIPConfigurations"
	poolType     = lbType + "/backendAddressPools"
	ruleType     = lbType + "/loadBalancingRules"
	probeType    = lbType + "/probes"
	natRuleType  = lbType + "/inboundNatRules"
	outRuleType  = lbType + "/outboundRules"
	natPoolType  = lbType + "/inboundNatPools"

	// lbSKUService is the load balancer SKU of pod-based (ServiceGateway)
	// backend pools. ARM takes it in exactly this case.
	lbSKUService = "Service"
)

var poolColl = &collSpec{
	key: "backendAddressPools", fullType: poolType, routable: true,
	putChild:         putPool,
	checkDeleteChild: checkDeletePool,
}

func init() {
	registerKind(&kindSpec{
		typ: "loadBalancers", fullType: lbType,
		// NRP answers a load balancer create with provisioningState
		// Succeeded (see loadbalancerclient.yaml).
		createSucceeded: true,
		collections: []*collSpec{
			{key: "frontendIPConfigurations", fullType: frontendType},
			poolColl,
			{key: "loadBalancingRules", fullType: ruleType},
			{key: "probes", fullType: probeType},
			{key: "inboundNatRules", fullType: natRuleType},
			{key: "outboundRules", fullType: outRuleType},
			{key: "inboundNatPools", fullType: natPoolType},
		},
		normalize:    normalizeLB,
		decorate:     decorateLB,
		decorateFrom: []string{"loadBalancingRules", "inboundNatRules", "inboundNatPools", "outboundRules"},
		checkDelete:  checkDeleteLB,
		onDelete:     onDeleteLB,
	})
}

// Back-reference members ARM computes on load balancer children.
var (
	frontendReadOnly = []string{"loadBalancingRules", "inboundNatRules", "inboundNatPools", "outboundRules"}
	poolReadOnly     = []string{"backendIPConfigurations", "loadBalancingRules", "outboundRule", "outboundRules", "inboundNatRules"}
	probeReadOnly    = []string{"loadBalancingRules"}
	natRuleReadOnly  = []string{"backendIPConfiguration"}
)

// lbIndex maps lower-cased child ids of one load balancer to canonical ids.
type lbIndex map[string]string

func (ix lbIndex) resolve(id string) (string, bool) {
	c, ok := ix[strings.ToLower(id)]
	return c, ok
}

func indexChildren(children []any, ix lbIndex) {
	for _, c := range children {
		id, _ := c.(obj)["id"].(string)
		ix[strings.ToLower(id)] = id
	}
}

func normalizeLB(wc *writeCtx, in obj, name string, old *version) (obj, *armError) {
	doc, props, ae := baseDoc(wc, kinds["loadbalancers"], in, name, old, true)
	if ae != nil {
		return nil, ae
	}
	if s, _ := in["sku"].(map[string]any); s != nil {
		if n, _ := s["name"].(string); strings.EqualFold(n, lbSKUService) && n != lbSKUService {
			return nil, nrpError(http.StatusBadRequest, "InvalidRequestFormat",
				"Cannot parse the request: sku.name '%s' is not one of Basic, Standard, Gateway, Service (Service is case-sensitive).", n)
		}
	}
	sku, ae := normSku(in, []string{"Basic", "Standard", "Gateway", lbSKUService}, "Basic")
	if ae != nil {
		return nil, ae
	}
	doc["sku"] = sku
	lbID := doc["id"].(string)
	loc := doc["location"].(string)
	if old != nil {
		if os, _ := old.doc["sku"].(obj); os != nil && stringOf(os["name"]) != stringOf(sku["name"]) {
			return nil, nrpError(http.StatusBadRequest, "LoadBalancerSkuCannotBeChanged",
				"The sku of load balancer %s cannot be changed from %s to %s: create a load balancer of the new sku instead.", lbID, stringOf(os["name"]), stringOf(sku["name"]))
		}
	}
	serviceSKU := sku["name"] == lbSKUService
	scope, ae := enumProp(props, "scope", "properties", "", "Public", "Private")
	if ae != nil {
		return nil, ae
	}

	var oldFrontends obj
	if old != nil {
		oldFrontends = obj{"frontendIPConfigurations": propsOf(old.doc)["frontendIPConfigurations"]}
	}
	pipUse := map[string]string{} // lower(pip id) -> frontend id
	takenPrivate := map[netip.Addr]bool{}
	frontends, ae := normChildren(props, "frontendIPConfigurations", lbID, frontendType, "properties", frontendReadOnly,
		func(fname, fid string, cp obj, path string) *armError {
			keep := ""
			if oldFrontends != nil {
				if of := findChild(oldFrontends, "frontendIPConfigurations", fname); of != nil {
					keep = stringOf(propsOf(of)["privateIPAddress"])
				}
			}
			return normFrontend(wc, lbID, loc, sku["name"].(string), fid, cp, path, keep, pipUse, takenPrivate)
		})
	if ae != nil {
		return nil, ae
	}
	if ae := checkFrontendZones(loc, frontends, oldFrontends); ae != nil {
		return nil, ae
	}
	if oldFrontends != nil {
		if ae := wc.checkFrontendsRemovable(lbID, droppedFrontends(asList(oldFrontends["frontendIPConfigurations"]), frontends)); ae != nil {
			return nil, ae
		}
	}
	ix := lbIndex{}
	indexChildren(frontends, ix)

	var oldPools obj
	if old != nil {
		oldPools = obj{"backendAddressPools": propsOf(old.doc)["backendAddressPools"]}
	}
	pools, ae := normChildren(props, "backendAddressPools", lbID, poolType, "properties", poolReadOnly,
		func(pname, pid string, cp obj, path string) *armError {
			var op obj
			if oldPools != nil {
				op = findChild(oldPools, "backendAddressPools", pname)
			}
			return normPoolProps(wc, doc, pid, cp, path, op, true)
		})
	if ae != nil {
		return nil, ae
	}
	if oldPools != nil {
		var dropped []obj
		for _, p := range asList(oldPools["backendAddressPools"]) {
			po := p.(obj)
			if findChild(obj{"backendAddressPools": pools}, "backendAddressPools", stringOf(po["name"])) == nil {
				dropped = append(dropped, po)
			}
		}
		if ae := checkRemovedPools(wc, lbID, dropped); ae != nil {
			return nil, ae
		}
	}
	indexChildren(pools, ix)

	probes, ae := normChildren(props, "probes", lbID, probeType, "properties", probeReadOnly, normProbe)
	if ae != nil {
		return nil, ae
	}
	indexChildren(probes, ix)
	if serviceSKU {
		if ae := checkServiceSKU(lbID, scope, frontends, probes); ae != nil {
			return nil, ae
		}
	}

	rules, ae := normChildren(props, "loadBalancingRules", lbID, ruleType, "properties", nil,
		func(rname, rid string, cp obj, path string) *armError { return normRule(ix, rid, cp, path) })
	if ae != nil {
		return nil, ae
	}
	if ae := checkRuleBackendPorts(rules); ae != nil {
		return nil, ae
	}
	if ae := checkRuleFrontendPorts(rules); ae != nil {
		return nil, ae
	}
	natRules, ae := normChildren(props, "inboundNatRules", lbID, natRuleType, "properties", natRuleReadOnly,
		func(rname, rid string, cp obj, path string) *armError { return normNatRule(ix, rid, cp, path) })
	if ae != nil {
		return nil, ae
	}
	outRules, ae := normChildren(props, "outboundRules", lbID, outRuleType, "properties", nil,
		func(rname, rid string, cp obj, path string) *armError { return normOutboundRule(ix, rid, cp, path) })
	if ae != nil {
		return nil, ae
	}
	natPools, ae := normChildren(props, "inboundNatPools", lbID, natPoolType, "properties", nil,
		func(rname, rid string, cp obj, path string) *armError {
			return resolveRefProp(ix, cp, "frontendIPConfiguration", path, rid, true)
		})
	if ae != nil {
		return nil, ae
	}
	props["frontendIPConfigurations"] = frontends
	props["backendAddressPools"] = pools
	props["probes"] = probes
	props["loadBalancingRules"] = rules
	props["inboundNatRules"] = natRules
	props["outboundRules"] = outRules
	props["inboundNatPools"] = natPools
	keepGUID(wc, props, old)
	doc["properties"] = props

	// Public IP back-references: set for the frontends now using a public IP,
	// clear for those no longer used.
	oldUse := map[string]string{}
	if old != nil {
		collectPIPUse(propsOf(old.doc), oldUse)
	}
	wc.after(func() {
		for pip := range oldUse {
			if _, still := pipUse[pip]; !still {
				wc.setPublicIPConfig(pip, "")
			}
		}
		for pip, fid := range pipUse {
			wc.setPublicIPConfig(pip, fid)
		}
	})
	return doc, nil
}

// collectPIPUse maps the public IPs referenced by frontends to the frontend ids.
func collectPIPUse(props obj, use map[string]string) {
	arr, _ := props["frontendIPConfigurations"].([]any)
	for _, f := range arr {
		fo := f.(obj)
		if r, ok := propsOf(fo)["publicIPAddress"].(obj); ok {
			use[strings.ToLower(stringOf(r["id"]))] = stringOf(fo["id"])
		}
	}
}

func normFrontend(wc *writeCtx, lbID, loc, lbSku, fid string, cp obj, path, keep string, pipUse map[string]string, taken map[netip.Addr]bool) *armError {
	pipID, hasPIP, err := getRef(cp, "publicIPAddress", path)
	if err != nil {
		return errBadShape(err)
	}
	subnetID, hasSubnet, err := getRef(cp, "subnet", path)
	if err != nil {
		return errBadShape(err)
	}
	prefixID, hasPrefix, err := getRef(cp, "publicIPPrefix", path)
	if err != nil {
		return errBadShape(err)
	}
	n := 0
	for _, b := range []bool{hasPIP, hasSubnet, hasPrefix} {
		if b {
			n++
		}
	}
	if n != 1 {
		return nrpError(http.StatusBadRequest, "LoadBalancerFrontendIPConfigurationInvalid",
			"Frontend IP configuration %s must reference exactly one of publicIPAddress, publicIPPrefix or subnet.", fid)
	}
	if gw, ok, err := getRef(cp, "gatewayLoadBalancer", path); err != nil {
		return errBadShape(err)
	} else if ok {
		cp["gatewayLoadBalancer"] = ref(gw)
	}
	switch {
	case hasPIP:
		_, v := wc.lookupKind(pipID, "publicIPAddresses")
		if v == nil || stringOf(v.doc["location"]) != loc {
			return errInvalidReference(pipID, fid)
		}
		canon := stringOf(v.doc["id"])
		pipSku := ""
		if s, ok := v.doc["sku"].(obj); ok {
			pipSku = stringOf(s["name"])
		}
		if pipSKUFor(lbSku) != pipSku {
			return nrpError(http.StatusBadRequest, "PublicIPAndLBSkuDoNotMatch",
				"%s sku load balancer %s cannot reference %s sku publicIP %s.", lbSku, lbID, pipSku, canon)
		}
		if prev, dup := pipUse[strings.ToLower(canon)]; dup {
			return nrpError(http.StatusBadRequest, "PublicIPReferencedByMultipleIPConfigs",
				"Public ip address %s is referenced by multiple ipconfigs in resource %s (%s and %s).", canon, lbID, prev, fid)
		}
		if r, ok := propsOf(v.doc)["ipConfiguration"].(obj); ok {
			user := stringOf(r["id"])
			if !strings.EqualFold(user, fid) {
				return nrpError(http.StatusBadRequest, "PublicIPAddressInUse",
					"Resource %s is already in use by %s and cannot be referenced by %s. A public IP address can be associated with one resource at a time.", canon, user, fid)
			}
		}
		if r, ok := propsOf(v.doc)["natGateway"].(obj); ok {
			return nrpError(http.StatusBadRequest, "PublicIPAddressInUse",
				"Resource %s is already in use by %s and cannot be referenced by %s.", canon, stringOf(r["id"]), fid)
		}
		pipUse[strings.ToLower(canon)] = fid
		cp["publicIPAddress"] = ref(canon)
		delete(cp, "privateIPAddress")
		delete(cp, "privateIPAddressVersion")
		setDefault(cp, "privateIPAllocationMethod", "Dynamic")
	case hasPrefix:
		_, v := wc.lookupKind(prefixID, "publicIPPrefixes")
		if v == nil || stringOf(v.doc["location"]) != loc {
			return errInvalidReference(prefixID, fid)
		}
		cp["publicIPPrefix"] = ref(stringOf(v.doc["id"]))
		setDefault(cp, "privateIPAllocationMethod", "Dynamic")
	case hasSubnet:
		vv, sub := wc.lookupChild(subnetID, "virtualNetworks", "subnets")
		if sub == nil || stringOf(vv.doc["location"]) != loc {
			return errInvalidReference(subnetID, fid)
		}
		canon := stringOf(sub["id"])
		cp["subnet"] = ref(canon)
		if ae := wc.assignPrivateIP(cp, canon, propsOf(sub), fid, keep, path, taken); ae != nil {
			return ae
		}
	}
	return nil
}

// normPoolProps validates a backend pool's properties (shared by the load
// balancer PUT and the backendAddressPools subresource PUT).
//
// NIC-derived entries (those with networkInterfaceIPConfiguration) follow
// the pool's members as NICs and scale set VMs make them; a PUT must echo
// each of them (same ip configuration, same name) and may change only its
// adminState; otherwise it fails with
// ModificationOfNICIpConfigBackendPoolNotSupported. The one exception: a
// load balancer PUT (lbPut) whose pool has no loadBalancerBackendAddresses
// at all keeps them as they are. old is the pool as stored (nil when new).
func normPoolProps(wc *writeCtx, lb obj, poolID string, cp obj, path string, old obj, lbPut bool) *armError {
	loc := stringOf(lb["location"])
	lbSku := ""
	if s, ok := lb["sku"].(obj); ok {
		lbSku = stringOf(s["name"])
	}
	for _, ro := range poolReadOnly {
		delete(cp, ro)
	}
	poolVNet := ""
	if id, ok, err := getRef(cp, "virtualNetwork", path); err != nil {
		return errBadShape(err)
	} else if ok {
		_, v := wc.lookupKind(id, "virtualNetworks")
		if v == nil || stringOf(v.doc["location"]) != loc {
			return errInvalidReference(id, poolID)
		}
		poolVNet = stringOf(v.doc["id"])
		cp["virtualNetwork"] = ref(poolVNet)
	}
	if n, ok, err := getInt(cp, "drainPeriodInSeconds", path); err != nil {
		return errBadShape(err)
	} else if ok && n > 0 && !wc.e.featureRegistered(wc.s.id, FeatureConnectionDraining) {
		// Connection draining needs a registered subscription feature; what
		// ARM does without it is not documented: refused (docs/emulator.md).
		return nrpError(http.StatusBadRequest, "SubscriptionNotRegisteredForFeature",
			"Subscription %s is not registered for feature %s required to carry out the requested operation (drainPeriodInSeconds of backend address pool %s).",
			wc.s.id, FeatureConnectionDraining, poolID)
	}
	if _, err := enumProp(cp, "syncMode", path, "", "Automatic", "Manual"); err != nil {
		return err
	}
	addrs, hasAddrs, err := getArr(cp, "loadBalancerBackendAddresses", path)
	if err != nil {
		return errBadShape(err)
	}
	if lbSku == lbSKUService && len(addrs) > 0 {
		return nrpError(http.StatusBadRequest, "BackendAddressesNotSupportedOnServiceSkuLoadBalancer",
			"Backend address pool %s of a sku Service load balancer takes its members from a service gateway, not from loadBalancerBackendAddresses.", poolID)
	}
	oldNIC := map[string]obj{} // lower(ip configuration id) -> stored entry
	for _, a := range asList(propsOf(old)["loadBalancerBackendAddresses"]) {
		if cfg := nicEntryConfig(a.(obj)); cfg != "" {
			oldNIC[strings.ToLower(cfg)] = a.(obj)
		}
	}
	seenNIC := map[string]bool{}
	out := make([]any, 0, len(addrs))
	names := make(map[string]bool, len(addrs))
	ips := make(map[string]string, len(addrs))
	base := joinPath(path, "loadBalancerBackendAddresses")
	for i, el := range addrs {
		p := indexPath(base, i)
		a, ok := el.(map[string]any)
		if !ok {
			return errBadShape(&fieldError{p, "expected an object, got " + jsonKind(el)})
		}
		name, has, err := getStr(a, "name", p)
		if err != nil {
			return errBadShape(err)
		}
		ap, err := getObj(a, "properties", p)
		if err != nil {
			return errBadShape(err)
		}
		// The decoded request is owned by this write: reuse its maps.
		np := ap
		if np == nil {
			np = obj{}
		}
		pp := p + ".properties"
		if cfg, isNIC, err := getRef(np, "networkInterfaceIPConfiguration", pp); err != nil {
			return errBadShape(err)
		} else if isNIC {
			entry, ae := nicEntry(poolID, cfg, name, np, oldNIC, seenNIC, pp)
			if ae != nil {
				return ae
			}
			name = stringOf(entry["name"])
			if names[strings.ToLower(name)] {
				return nrpError(http.StatusBadRequest, "DuplicateBackendAddressName",
					"Backend address pool %s has more than one backend address named '%s'.", poolID, name)
			}
			names[strings.ToLower(name)] = true
			out = append(out, entry)
			continue
		}
		if !has || name == "" {
			name = wc.e.ids.uuid()
		}
		if names[strings.ToLower(name)] {
			return nrpError(http.StatusBadRequest, "DuplicateBackendAddressName",
				"Backend address pool %s has more than one backend address named '%s'.", poolID, name)
		}
		names[strings.ToLower(name)] = true
		if m, ok := oldNICByName(oldNIC, name); ok {
			return errNICPoolModification(poolID, nicEntryConfig(m))
		}
		delete(np, "inboundNatRulesPortMapping")
		ipStr, hasIP, err := getStr(np, "ipAddress", pp)
		if err != nil {
			return errBadShape(err)
		}
		vnetID, hasVNet, err := getRef(np, "virtualNetwork", pp)
		if err != nil {
			return errBadShape(err)
		}
		subnetID, hasSubnet, err := getRef(np, "subnet", pp)
		if err != nil {
			return errBadShape(err)
		}
		feID, hasFE, err := getRef(np, "loadBalancerFrontendIPConfiguration", pp)
		if err != nil {
			return errBadShape(err)
		}
		if _, err := enumProp(np, "adminState", pp, "", "None", "Up", "Down"); err != nil {
			return err
		}
		if hasFE {
			setRef(np, "loadBalancerFrontendIPConfiguration", feID)
		}
		if hasIP {
			ip, perr := netip.ParseAddr(ipStr)
			if perr != nil || ip.Zone() != "" {
				return nrpError(http.StatusBadRequest, "InvalidBackendAddressIPAddress",
					"Backend address '%s' of backend address pool %s has an invalid ipAddress '%s'.", name, poolID, ipStr)
			}
			if lbSku == "Basic" {
				return nrpError(http.StatusBadRequest, "IpBasedBackendAddressPoolNotSupportedOnBasicSku",
					"Backend address pool %s uses IP addresses, which only Standard sku load balancers support.", poolID)
			}
			if prev, dup := ips[ip.String()]; dup {
				return nrpError(http.StatusBadRequest, "DuplicateBackendAddressIPAddress",
					"Backend addresses '%s' and '%s' of backend address pool %s have the same ipAddress %s.", prev, name, poolID, ip)
			}
			ips[ip.String()] = name
			if !hasVNet && !hasSubnet && poolVNet == "" && !hasFE {
				return nrpError(http.StatusBadRequest, "BackendAddressVirtualNetworkRequired",
					"Backend address '%s' of backend address pool %s has an ipAddress but no virtualNetwork or subnet; IP-based backend addresses must reference the virtual network they belong to.", name, poolID)
			}
		}
		if hasVNet {
			_, v := wc.lookupKind(vnetID, "virtualNetworks")
			if v == nil || stringOf(v.doc["location"]) != loc {
				return errInvalidReference(vnetID, poolID)
			}
			setRef(np, "virtualNetwork", stringOf(v.doc["id"]))
		}
		if hasSubnet {
			_, sub := wc.lookupChild(subnetID, "virtualNetworks", "subnets")
			if sub == nil {
				return errInvalidReference(subnetID, poolID)
			}
			setRef(np, "subnet", stringOf(sub["id"]))
		}
		for k := range a {
			if k != "name" && k != "properties" {
				delete(a, k)
			}
		}
		a["name"] = name
		a["properties"] = np
		out = append(out, a)
	}
	for k, m := range oldNIC {
		if seenNIC[k] {
			continue
		}
		if lbPut && !hasAddrs {
			out = append(out, m)
			continue
		}
		return errNICPoolModification(poolID, nicEntryConfig(m))
	}
	if len(oldNIC) > 0 && len(ips) > 0 {
		return nrpError(http.StatusBadRequest, "CannotMixIPBasedAddressesAndIPConfigurationsOnLoadBalancerBackendAddressPool",
			"Backend address pool %s holds ip configurations and cannot take IP address based backend addresses as well.", poolID)
	}
	cp["loadBalancerBackendAddresses"] = out
	if refs := propsOf(old)["backendIPConfigurations"]; refs != nil {
		cp["backendIPConfigurations"] = refs
	}
	return nil
}

// nicEntry validates a request entry that names an ip configuration: it
// must be one of the pool's NIC-derived entries, listed once, with its
// name, and nothing but its adminState may differ.
func nicEntry(poolID, cfg, name string, np obj, oldNIC map[string]obj, seen map[string]bool, path string) (obj, *armError) {
	k := strings.ToLower(cfg)
	m, ok := oldNIC[k]
	if !ok {
		return nil, errNICPoolModification(poolID, cfg)
	}
	if seen[k] {
		return nil, nrpError(http.StatusBadRequest, "DuplicateIpConfigurationReferenceOnBackendAddressPool",
			"Found duplicate ipConfiguration reference %s on backend pool addresses of %s.", cfg, poolID)
	}
	seen[k] = true
	if name != "" && !strings.EqualFold(name, stringOf(m["name"])) {
		return nil, errNICPoolModification(poolID, cfg)
	}
	for _, key := range []string{"ipAddress", "virtualNetwork", "subnet", "loadBalancerFrontendIPConfiguration"} {
		if v, has := np[key]; has && v != nil {
			return nil, errNICPoolModification(poolID, cfg)
		}
	}
	state, ae := enumProp(np, "adminState", path, "", "None", "Up", "Down")
	if ae != nil {
		return nil, ae
	}
	props := obj{"networkInterfaceIPConfiguration": propsOf(m)["networkInterfaceIPConfiguration"]}
	if state != "" {
		props["adminState"] = state
	}
	return obj{"name": m["name"], "properties": props}, nil
}

func oldNICByName(oldNIC map[string]obj, name string) (obj, bool) {
	for _, m := range oldNIC {
		if strings.EqualFold(stringOf(m["name"]), name) {
			return m, true
		}
	}
	return nil, false
}

func errNICPoolModification(poolID, cfg string) *armError {
	return nrpError(http.StatusBadRequest, "ModificationOfNICIpConfigBackendPoolNotSupported",
		"Operation on backend address pool %s is not allowed because it adds, modifies or deletes backend addresses specified with a network interface ip configuration (%s). Change the network interface or scale set VM instead.",
		poolID, cfg)
}

func normProbe(name, id string, cp obj, path string) *armError {
	proto, ae := enumProp(cp, "protocol", path, "", "Http", "Tcp", "Https")
	if ae != nil {
		return ae
	}
	if proto == "" {
		return nrpError(http.StatusBadRequest, "InvalidRequestFormat", "Cannot parse the request: %s.protocol is required for probe %s.", path, id)
	}
	port, has, err := getInt(cp, "port", path)
	if err != nil {
		return errBadShape(err)
	}
	if !has || port < 1 || port > 65535 {
		return nrpError(http.StatusBadRequest, "InvalidProbePort", "Probe %s must have a port between 1 and 65535.", id)
	}
	cp["port"] = port
	rp, _, err := getStr(cp, "requestPath", path)
	if err != nil {
		return errBadShape(err)
	}
	if proto == "Tcp" && rp != "" {
		return nrpError(http.StatusBadRequest, "ProbeRequestPathNotAllowedForTcp", "Probe %s uses protocol Tcp and cannot have a requestPath.", id)
	}
	if proto != "Tcp" && rp == "" {
		return nrpError(http.StatusBadRequest, "ProbeRequestPathRequired", "Probe %s uses protocol %s and needs a requestPath.", id, proto)
	}
	for _, k := range []string{"intervalInSeconds", "numberOfProbes", "probeThreshold"} {
		if _, _, err := getInt(cp, k, path); err != nil {
			return errBadShape(err)
		}
	}
	setDefault(cp, "intervalInSeconds", 15)
	setDefault(cp, "numberOfProbes", 2)
	setDefault(cp, "probeThreshold", 1)
	return nil
}

// resolveRefProp resolves the reference cp[key] to a child of this load
// balancer and rewrites it to the canonical id.
func resolveRefProp(ix lbIndex, cp obj, key, path, byID string, required bool) *armError {
	id, has, err := getRef(cp, key, path)
	if err != nil {
		return errBadShape(err)
	}
	if !has {
		if required {
			return nrpError(http.StatusBadRequest, "InvalidRequestFormat", "Cannot parse the request: %s.%s is required for %s.", path, key, byID)
		}
		return nil
	}
	canon, ok := ix.resolve(id)
	if !ok {
		return errInvalidReference(id, byID)
	}
	cp[key] = ref(canon)
	return nil
}

func resolveRefListProp(ix lbIndex, cp obj, key, path, byID string) ([]string, *armError) {
	ids, has, err := getRefList(cp, key, path)
	if err != nil {
		return nil, errBadShape(err)
	}
	if !has {
		return nil, nil
	}
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		canon, ok := ix.resolve(id)
		if !ok {
			return nil, errInvalidReference(id, byID)
		}
		out = append(out, canon)
	}
	cp[key] = refList(out)
	return out, nil
}

func portProp(cp obj, key, path, id string, required bool) *armError {
	v, has, err := getInt(cp, key, path)
	if err != nil {
		return errBadShape(err)
	}
	if !has {
		if required {
			return nrpError(http.StatusBadRequest, "InvalidRequestFormat", "Cannot parse the request: %s.%s is required for %s.", path, key, id)
		}
		return nil
	}
	if v < 0 || v > 65535 {
		return nrpError(http.StatusBadRequest, "InvalidPortValue", "%s of %s must be between 0 and 65535, got %d.", key, id, v)
	}
	cp[key] = v
	return nil
}

func protocolProp(cp obj, path, id string, allowed ...string) *armError {
	p, ae := enumProp(cp, "protocol", path, "", allowed...)
	if ae != nil {
		return ae
	}
	if p == "" {
		return nrpError(http.StatusBadRequest, "InvalidRequestFormat", "Cannot parse the request: %s.protocol is required for %s.", path, id)
	}
	return nil
}

func normRule(ix lbIndex, id string, cp obj, path string) *armError {
	if ae := resolveRefProp(ix, cp, "frontendIPConfiguration", path, id, true); ae != nil {
		return ae
	}
	if ae := resolveRefProp(ix, cp, "backendAddressPool", path, id, false); ae != nil {
		return ae
	}
	pools, ae := resolveRefListProp(ix, cp, "backendAddressPools", path, id)
	if ae != nil {
		return ae
	}
	if r, ok := cp["backendAddressPool"].(obj); ok && pools == nil {
		cp["backendAddressPools"] = []any{ref(stringOf(r["id"]))}
	} else if len(pools) > 0 && cp["backendAddressPool"] == nil {
		cp["backendAddressPool"] = ref(pools[0])
	}
	if ae := resolveRefProp(ix, cp, "probe", path, id, false); ae != nil {
		return ae
	}
	if ae := protocolProp(cp, path, id, "Tcp", "Udp", "All"); ae != nil {
		return ae
	}
	if ae := portProp(cp, "frontendPort", path, id, true); ae != nil {
		return ae
	}
	if ae := portProp(cp, "backendPort", path, id, false); ae != nil {
		return ae
	}
	if _, ok := cp["backendPort"]; !ok {
		cp["backendPort"] = cp["frontendPort"]
	}
	// Port 0 is "Any Port", the HA ports rule's (protocol All, both ports
	// 0); what ARM does with it on a Tcp or Udp rule is not documented:
	// refused, the strictest reading.
	if p := stringOf(cp["protocol"]); !strings.EqualFold(p, "All") && (intOf(cp["frontendPort"]) == 0 || intOf(cp["backendPort"]) == 0) {
		return nrpError(http.StatusBadRequest, "LoadBalancingRulePortZeroRequiresProtocolAll",
			"Load balancing rule %s has protocol %s and frontendPort %v, backendPort %v: port 0 (Any Port) is only valid on a rule with protocol All.",
			id, p, cp["frontendPort"], cp["backendPort"])
	}
	if _, err := enumProp(cp, "loadDistribution", path, "Default", "Default", "SourceIP", "SourceIPProtocol"); err != nil {
		return err
	}
	for _, k := range []string{"enableFloatingIP", "enableTcpReset", "disableOutboundSnat"} {
		if _, _, err := getBool(cp, k, path); err != nil {
			return errBadShape(err)
		}
		setDefault(cp, k, false)
	}
	if _, _, err := getInt(cp, "idleTimeoutInMinutes", path); err != nil {
		return errBadShape(err)
	}
	setDefault(cp, "idleTimeoutInMinutes", 4)
	return nil
}

func normNatRule(ix lbIndex, id string, cp obj, path string) *armError {
	if ae := resolveRefProp(ix, cp, "frontendIPConfiguration", path, id, true); ae != nil {
		return ae
	}
	if ae := resolveRefProp(ix, cp, "backendAddressPool", path, id, false); ae != nil {
		return ae
	}
	if ae := protocolProp(cp, path, id, "Tcp", "Udp", "All"); ae != nil {
		return ae
	}
	_, hasRange := cp["frontendPortRangeStart"]
	if ae := portProp(cp, "frontendPort", path, id, !hasRange); ae != nil {
		return ae
	}
	for _, k := range []string{"frontendPortRangeStart", "frontendPortRangeEnd", "backendPort"} {
		if ae := portProp(cp, k, path, id, false); ae != nil {
			return ae
		}
	}
	for _, k := range []string{"enableFloatingIP", "enableTcpReset"} {
		if _, _, err := getBool(cp, k, path); err != nil {
			return errBadShape(err)
		}
		setDefault(cp, k, false)
	}
	setDefault(cp, "idleTimeoutInMinutes", 4)
	return nil
}

func normOutboundRule(ix lbIndex, id string, cp obj, path string) *armError {
	fes, ae := resolveRefListProp(ix, cp, "frontendIPConfigurations", path, id)
	if ae != nil {
		return ae
	}
	if len(fes) == 0 {
		return nrpError(http.StatusBadRequest, "InvalidRequestFormat", "Cannot parse the request: %s.frontendIPConfigurations is required for %s.", path, id)
	}
	if ae := resolveRefProp(ix, cp, "backendAddressPool", path, id, true); ae != nil {
		return ae
	}
	if ae := protocolProp(cp, path, id, "Tcp", "Udp", "All"); ae != nil {
		return ae
	}
	if _, _, err := getInt(cp, "allocatedOutboundPorts", path); err != nil {
		return errBadShape(err)
	}
	setDefault(cp, "allocatedOutboundPorts", 0)
	setDefault(cp, "idleTimeoutInMinutes", 4)
	setDefault(cp, "enableTcpReset", false)
	return nil
}

// decorateLB adds the back-references ARM reports on frontends, pools and
// probes (loadBalancingRules, inboundNatRules, outboundRules, ...).
func decorateLB(tree obj) {
	props := propsOf(tree)
	byID := map[string]obj{} // lower(child id) -> rendered child properties
	for _, key := range []string{"frontendIPConfigurations", "backendAddressPools", "probes"} {
		arr, _ := props[key].([]any)
		for _, c := range arr {
			co := c.(obj)
			byID[strings.ToLower(stringOf(co["id"]))] = propsOf(co)
		}
	}
	add := func(target any, member, id string) {
		r, ok := target.(obj)
		if !ok {
			return
		}
		cp := byID[strings.ToLower(stringOf(r["id"]))]
		if cp == nil {
			return
		}
		list, _ := cp[member].([]any)
		for _, x := range list {
			if stringOf(x.(obj)["id"]) == id {
				return
			}
		}
		cp[member] = append(list, ref(id))
	}
	each := func(key string, fn func(id string, cp obj)) {
		arr, _ := props[key].([]any)
		for _, c := range arr {
			co := c.(obj)
			fn(stringOf(co["id"]), propsOf(co))
		}
	}
	each("loadBalancingRules", func(id string, cp obj) {
		add(cp["frontendIPConfiguration"], "loadBalancingRules", id)
		add(cp["probe"], "loadBalancingRules", id)
		if pools, ok := cp["backendAddressPools"].([]any); ok {
			for _, p := range pools {
				add(p, "loadBalancingRules", id)
			}
		} else {
			add(cp["backendAddressPool"], "loadBalancingRules", id)
		}
	})
	each("inboundNatRules", func(id string, cp obj) {
		add(cp["frontendIPConfiguration"], "inboundNatRules", id)
		add(cp["backendAddressPool"], "inboundNatRules", id)
	})
	each("inboundNatPools", func(id string, cp obj) {
		add(cp["frontendIPConfiguration"], "inboundNatPools", id)
	})
	each("outboundRules", func(id string, cp obj) {
		if fes, ok := cp["frontendIPConfigurations"].([]any); ok {
			for _, f := range fes {
				add(f, "outboundRules", id)
			}
		}
		add(cp["backendAddressPool"], "outboundRules", id)
		if r, ok := cp["backendAddressPool"].(obj); ok {
			if pp := byID[strings.ToLower(stringOf(r["id"]))]; pp != nil {
				pp["outboundRule"] = ref(id)
			}
		}
	})
}

// checkDeleteLB rejects deleting a load balancer whose pools a service
// gateway service uses, a scale set model lists or ip configurations are
// members of.
func checkDeleteLB(wc *writeCtx, v *version) *armError {
	if ae := wc.checkFrontendsRemovable(stringOf(v.doc["id"]), droppedFrontends(asList(propsOf(v.doc)["frontendIPConfigurations"]), nil)); ae != nil {
		return ae
	}
	if gw, svc, used := wc.poolUsers(stringOf(v.doc["id"]), ""); used {
		return errLBInUseByGateway("A backend address pool of load balancer "+stringOf(v.doc["id"]), gw, svc)
	}
	var pools []obj
	for _, p := range asList(propsOf(v.doc)["backendAddressPools"]) {
		pools = append(pools, p.(obj))
	}
	return wc.checkPoolsRemovable(stringOf(v.doc["id"]), pools)
}

func onDeleteLB(wc *writeCtx, v *version) {
	use := map[string]string{}
	collectPIPUse(propsOf(v.doc), use)
	for pip := range use {
		wc.setPublicIPConfig(pip, "")
	}
}

// childIn starts every child PUT: the child's id and name (an existing child
// keeps its own spelling) and the request's properties object, empty when
// the body has none. Callers copy the properties before changing them.
func childIn(parent obj, coll, name string, in, existing obj) (id, childName string, props obj, ae *armError) {
	id, childName = stringOf(parent["id"])+"/"+coll+"/"+name, name
	if existing != nil {
		id, childName = stringOf(existing["id"]), stringOf(existing["name"])
	}
	props, err := getObj(in, "properties", "")
	if err != nil {
		return "", "", nil, errBadShape(err)
	}
	if props == nil {
		props = obj{}
	}
	return id, childName, props, nil
}

func putPool(wc *writeCtx, parent obj, name string, in obj, existing obj) (obj, *armError) {
	pid, name, cp, ae := childIn(parent, "backendAddressPools", name, in, existing)
	if ae != nil {
		return nil, ae
	}
	cp = shallowCopy(cp)
	delete(cp, "provisioningState")
	if ae := normPoolProps(wc, parent, pid, cp, "properties", existing, false); ae != nil {
		return nil, ae
	}
	return obj{"name": name, "id": pid, "type": poolType, "properties": cp}, nil
}

func checkDeletePool(wc *writeCtx, parent obj, child obj) *armError {
	if gw, svc, used := wc.poolUsers("", stringOf(child["id"])); used {
		return errLBInUseByGateway("Backend address pool "+stringOf(child["id"]), gw, svc)
	}
	if ae := wc.checkPoolsRemovable(stringOf(parent["id"]), []obj{child}); ae != nil {
		return ae
	}
	pid := strings.ToLower(stringOf(child["id"]))
	props := propsOf(parent)
	for _, key := range []string{"loadBalancingRules", "inboundNatRules", "outboundRules"} {
		arr, _ := props[key].([]any)
		for _, r := range arr {
			ro := r.(obj)
			cp := propsOf(ro)
			refs := []any{cp["backendAddressPool"]}
			if l, ok := cp["backendAddressPools"].([]any); ok {
				refs = append(refs, l...)
			}
			for _, x := range refs {
				if xo, ok := x.(obj); ok && strings.ToLower(stringOf(xo["id"])) == pid {
					return nrpError(http.StatusBadRequest, "InUseBackendAddressPoolCannotBeDeleted",
						"Backend address pool %s is in use by %s and cannot be deleted.", stringOf(child["id"]), stringOf(ro["id"]))
				}
			}
		}
	}
	return nil
}

// pipSKUFor is the public IP SKU a load balancer SKU's frontends take.
func pipSKUFor(lbSku string) string {
	switch lbSku {
	case "Standard", "Gateway":
		return "Standard"
	case lbSKUService:
		return "StandardV2"
	default:
		return "Basic"
	}
}

// checkServiceSKU applies the rules of a Service SKU load balancer: a scope
// matching its frontends (Public with public IPs, Private with subnets), no
// probes (pods are reached directly and NRP programs the pools); its pools
// take no explicit backend addresses (normPoolProps: their members come
// from the service gateway's address locations). The recordings show none of this; these are
// the emulator's conservative readings of the SKU (docs/emulator.md).
func checkServiceSKU(lbID, scope string, frontends, probes []any) *armError {
	if len(probes) > 0 {
		return nrpError(http.StatusBadRequest, "ProbesNotSupportedOnServiceSkuLoadBalancer",
			"Load balancer %s of sku Service cannot have probes.", lbID)
	}
	want := ""
	for _, f := range frontends {
		fp := propsOf(f.(obj))
		w := "Private"
		if fp["publicIPAddress"] != nil || fp["publicIPPrefix"] != nil {
			w = "Public"
		}
		if want != "" && want != w {
			return nrpError(http.StatusBadRequest, "ServiceSkuLoadBalancerMixedScope",
				"Load balancer %s of sku Service cannot have both public and private frontends.", lbID)
		}
		want = w
	}
	if scope == "" {
		return nrpError(http.StatusBadRequest, "ServiceSkuLoadBalancerScopeRequired",
			"Load balancer %s of sku Service needs properties.scope (Public or Private).", lbID)
	}
	if want != "" && scope != want {
		return nrpError(http.StatusBadRequest, "ServiceSkuLoadBalancerScopeMismatch",
			"Load balancer %s has scope %s but %s frontends.", lbID, scope, strings.ToLower(want))
	}
	return nil
}

// checkRuleFrontendPorts rejects two rules that take the same protocol and
// frontend port of one frontend (a frontend is the three-tuple address,
// protocol, port), and a rule of protocol All (HA ports) beside any other
// rule on its frontend. Azure's code for this is not documented: the
// strictest reading, with the code below (docs/emulator.md).
func checkRuleFrontendPorts(rules []any) *armError {
	seen := map[string]string{}
	all := map[string]string{}
	other := map[string]string{}
	for _, r := range rules {
		ro := r.(obj)
		cp := propsOf(ro)
		fe := ""
		if f, ok := cp["frontendIPConfiguration"].(obj); ok {
			fe = strings.ToLower(stringOf(f["id"]))
		}
		id := stringOf(ro["id"])
		proto := strings.ToLower(stringOf(cp["protocol"]))
		if proto == "all" {
			if prev, ok := other[fe]; ok {
				return errFrontendPortTaken(prev, id, fe)
			}
			all[fe] = id
		} else if prev, ok := all[fe]; ok {
			return errFrontendPortTaken(prev, id, fe)
		}
		key := fe + "|" + proto + "|" + fmt.Sprint(cp["frontendPort"])
		if prev, dup := seen[key]; dup {
			return errFrontendPortTaken(prev, id, fe)
		}
		seen[key] = id
		other[fe] = id
	}
	return nil
}

func errFrontendPortTaken(a, b, fe string) *armError {
	return nrpError(http.StatusBadRequest, "LoadBalancingRulesUseSameFrontendIPConfigurationProtocolAndPort",
		"Load balancing rules %s and %s use the same frontend IP configuration %s, protocol and frontend port (or one takes all ports).", a, b, fe)
}

// checkRuleBackendPorts rejects two rules without floating IP that send the
// same protocol and backend port to the same pool
// (RulesUseSameBackendPortProtocolAndPool).
func checkRuleBackendPorts(rules []any) *armError {
	seen := map[string]string{}
	for _, r := range rules {
		ro := r.(obj)
		cp := propsOf(ro)
		if fip, _ := cp["enableFloatingIP"].(bool); fip {
			continue
		}
		var pools []string
		if l, ok := cp["backendAddressPools"].([]any); ok {
			for _, x := range l {
				pools = append(pools, strings.ToLower(stringOf(x.(obj)["id"])))
			}
		}
		for _, p := range pools {
			key := p + "|" + stringOf(cp["protocol"]) + "|" + fmt.Sprint(cp["backendPort"])
			if prev, dup := seen[key]; dup {
				return nrpError(http.StatusBadRequest, "RulesUseSameBackendPortProtocolAndPool",
					"Load balancing rules %s and %s with floating IP disabled use the same protocol %v and backend port %v and must not be used with the same backend address pool %s.",
					prev, stringOf(ro["id"]), cp["protocol"], cp["backendPort"], p)
			}
			seen[key] = stringOf(ro["id"])
		}
	}
	return nil
}

// checkRemovedPools rejects a load balancer update that drops pools a
// service gateway service still uses, a scale set model lists or ip
// configurations are members of.
func checkRemovedPools(wc *writeCtx, lbID string, dropped []obj) *armError {
	for _, p := range dropped {
		id := stringOf(p["id"])
		if gw, svc, used := wc.poolUsers("", id); used {
			return errLBInUseByGateway("Backend address pool "+id, gw, svc)
		}
	}
	return wc.checkPoolsRemovable(lbID, dropped)
}
