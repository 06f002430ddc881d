package emulator

import (
	"net/http"
	"net/netip"
	"strings"
)

const subnetType = "Microsoft.Network/virtualNetworks/subnets"

var subnetColl = &collSpec{
	key: "subnets", fullType: subnetType, routable: true,
	putChild:         putSubnet,
	checkDeleteChild: checkDeleteSubnet,
}

func init() {
	registerKind(&kindSpec{
		typ: "virtualNetworks", fullType: "Microsoft.Network/virtualNetworks",
		// The recordings show 201 for a PUT on an existing virtual network.
		updateStatus: http.StatusCreated,
		collections:  []*collSpec{subnetColl, {key: "virtualNetworkPeerings", fullType: "Microsoft.Network/virtualNetworks/virtualNetworkPeerings"}},
		normalize:    normalizeVNet,
		checkDelete:  checkDeleteVNet,
	})
}

// subnetReadOnly lists subnet members computed by ARM.
var subnetReadOnly = []string{"ipConfigurations", "ipConfigurationProfiles", "purpose", "resourceNavigationLinks", "serviceAssociationLinks", "privateEndpoints"}

// vnetPrefixes parses addressSpace.addressPrefixes of a vnet document.
func vnetPrefixes(props obj) []netip.Prefix {
	as, _ := props["addressSpace"].(obj)
	arr, _ := as["addressPrefixes"].([]any)
	var out []netip.Prefix
	for _, v := range arr {
		if s, ok := v.(string); ok {
			if p, err := netip.ParsePrefix(s); err == nil {
				out = append(out, p.Masked())
			}
		}
	}
	return out
}

func normalizeVNet(wc *writeCtx, in obj, name string, old *version) (obj, *armError) {
	doc, props, ae := baseDoc(wc, kinds["virtualnetworks"], in, name, old, true)
	if ae != nil {
		return nil, ae
	}
	id := doc["id"].(string)
	as, err := getObj(props, "addressSpace", "properties")
	if err != nil {
		return nil, errBadShape(err)
	}
	if as == nil {
		return nil, nrpError(http.StatusBadRequest, "InvalidAddressSpace",
			"Virtual network %s must have an address space (properties.addressSpace.addressPrefixes).", id)
	}
	pfx, _, err := getArr(as, "addressPrefixes", "properties.addressSpace")
	if err != nil {
		return nil, errBadShape(err)
	}
	if len(pfx) == 0 {
		return nil, nrpError(http.StatusBadRequest, "InvalidAddressSpace",
			"Virtual network %s must have at least one address prefix in properties.addressSpace.addressPrefixes.", id)
	}
	for i, v := range pfx {
		s, ok := v.(string)
		if !ok {
			return nil, errBadShape(&fieldError{indexPath("properties.addressSpace.addressPrefixes", i), "expected a string, got " + jsonKind(v)})
		}
		if _, err := netip.ParsePrefix(s); err != nil {
			return nil, nrpError(http.StatusBadRequest, "InvalidAddressPrefixFormat",
				"Address prefix %s of resource %s is not formatted correctly. It should follow CIDR notation, for example 10.0.0.0/24.", s, id)
		}
	}
	props["addressSpace"] = deepCopy(as)
	prefixes := vnetPrefixes(props)
	subnets, ae := normChildren(props, "subnets", id, subnetColl.fullType, "properties", subnetReadOnly,
		func(sname, sid string, cp obj, path string) *armError {
			return normSubnetProps(wc, prefixes, sid, cp, path)
		})
	if ae != nil {
		return nil, ae
	}
	if ae := checkSubnetOverlap(subnets); ae != nil {
		return nil, ae
	}
	if old != nil {
		// Subnets still used by load balancer frontends or NICs cannot be
		// removed by a vnet PUT.
		for _, sc := range asList(propsOf(old.doc)["subnets"]) {
			so := sc.(obj)
			n, _ := so["name"].(string)
			if findChild(obj{"subnets": subnets}, "subnets", n) == nil {
				if ae := checkDeleteSubnet(wc, old.doc, so); ae != nil {
					return nil, ae
				}
			}
		}
	}
	props["subnets"] = subnets
	peer, ae := normChildren(props, "virtualNetworkPeerings", id, "Microsoft.Network/virtualNetworks/virtualNetworkPeerings", "properties", nil, nil)
	if ae != nil {
		return nil, ae
	}
	props["virtualNetworkPeerings"] = peer
	setDefault(props, "privateEndpointVNetPolicies", "Disabled")
	if _, _, err := getBool(props, "enableDdosProtection", "properties"); err != nil {
		return nil, errBadShape(err)
	}
	setDefault(props, "enableDdosProtection", false)
	keepGUID(wc, props, old)
	doc["properties"] = props
	return doc, nil
}

// normSubnetProps validates a subnet's properties against the vnet's
// address space and fills ARM's defaults.
func normSubnetProps(wc *writeCtx, vnetPrefixes []netip.Prefix, sid string, cp obj, path string) *armError {
	var list []string
	if s, ok, err := getStr(cp, "addressPrefix", path); err != nil {
		return errBadShape(err)
	} else if ok {
		list = append(list, s)
	}
	if arr, ok, err := getArr(cp, "addressPrefixes", path); err != nil {
		return errBadShape(err)
	} else if ok {
		for i, v := range arr {
			s, isStr := v.(string)
			if !isStr {
				return errBadShape(&fieldError{indexPath(joinPath(path, "addressPrefixes"), i), "expected a string, got " + jsonKind(v)})
			}
			list = append(list, s)
		}
	}
	if len(list) == 0 {
		return nrpError(http.StatusBadRequest, "NetcfgInvalidSubnet",
			"Subnet %s is not valid because it has no address prefix (properties.addressPrefix).", sid)
	}
	for _, s := range list {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return nrpError(http.StatusBadRequest, "InvalidAddressPrefixFormat",
				"Address prefix %s of resource %s is not formatted correctly. It should follow CIDR notation, for example 10.0.0.0/24.", s, sid)
		}
		if p.Masked() != p {
			return nrpError(http.StatusBadRequest, "InvalidCIDRNotation",
				"The address prefix %s in resource %s has an invalid CIDR notation. For the given prefix length, the address prefix should be %s.", s, sid, p.Masked())
		}
		inside := false
		for _, vp := range vnetPrefixes {
			if vp.Bits() <= p.Bits() && vp.Contains(p.Addr()) {
				inside = true
			}
		}
		if !inside {
			return nrpError(http.StatusBadRequest, "NetcfgSubnetRangeOutsideVnet",
				"Subnet '%s' is not valid because its IP address range is outside the IP address range of virtual network.", sid[strings.LastIndexByte(sid, '/')+1:])
		}
	}
	if nsg, ok, err := getRef(cp, "networkSecurityGroup", path); err != nil {
		return errBadShape(err)
	} else if ok {
		if _, v := wc.lookupKind(nsg, "networkSecurityGroups"); v == nil {
			return errInvalidReference(nsg, sid)
		}
		cp["networkSecurityGroup"] = ref(nsg)
	}
	if ng, ok, err := getRef(cp, "natGateway", path); err != nil {
		return errBadShape(err)
	} else if ok {
		if _, v := wc.lookupKind(ng, "natGateways"); v == nil {
			return errInvalidReference(ng, sid)
		}
		cp["natGateway"] = ref(ng)
	}
	setDefault(cp, "delegations", []any{})
	setDefault(cp, "privateEndpointNetworkPolicies", "Disabled")
	setDefault(cp, "privateLinkServiceNetworkPolicies", "Enabled")
	return nil
}

// checkSubnetOverlap rejects subnets whose ranges overlap.
func checkSubnetOverlap(subnets []any) *armError {
	type sp struct {
		id string
		p  netip.Prefix
	}
	var all []sp
	for _, s := range subnets {
		so := s.(obj)
		cp := propsOf(so)
		id, _ := so["id"].(string)
		var list []string
		if a, ok := cp["addressPrefix"].(string); ok {
			list = append(list, a)
		}
		if arr, ok := cp["addressPrefixes"].([]any); ok {
			for _, v := range arr {
				if a, ok := v.(string); ok {
					list = append(list, a)
				}
			}
		}
		for _, a := range list {
			if p, err := netip.ParsePrefix(a); err == nil {
				for _, o := range all {
					if o.id != id && o.p.Overlaps(p) {
						return nrpError(http.StatusBadRequest, "NetcfgSubnetRangesOverlap",
							"Subnet '%s' is not valid because its IP address range overlaps with that of an existing subnet in virtual network.", id[strings.LastIndexByte(id, '/')+1:])
					}
				}
				all = append(all, sp{id, p})
			}
		}
	}
	return nil
}

func putSubnet(wc *writeCtx, parent obj, name string, in obj, existing obj) (obj, *armError) {
	props := propsOf(parent)
	sid, name, cp, ae := childIn(parent, "subnets", name, in, existing)
	if ae != nil {
		return nil, ae
	}
	cp = deepCopy(cp).(obj)
	delete(cp, "provisioningState")
	for _, ro := range subnetReadOnly {
		delete(cp, ro)
	}
	if ae := normSubnetProps(wc, vnetPrefixes(props), sid, cp, "properties"); ae != nil {
		return nil, ae
	}
	child := obj{"name": name, "id": sid, "type": subnetType, "properties": cp}
	// Check overlap against the other subnets.
	var others []any
	arr, _ := props["subnets"].([]any)
	for _, s := range arr {
		if n, _ := s.(obj)["name"].(string); !strings.EqualFold(n, name) {
			others = append(others, s)
		}
	}
	if ae := checkSubnetOverlap(append(others, child)); ae != nil {
		return nil, ae
	}
	return child, nil
}

// subnetIPConfigs calls fn with every load balancer frontend and NIC ip
// configuration, of a live resource in any group, that references subnet id.
func (wc *writeCtx) subnetIPConfigs(id string, fn func(g *group, cfg obj)) {
	for _, s := range wc.e.subs {
		for _, g := range s.groups {
			for key, en := range g.resources {
				if en.cur == nil || en.cur.phaseAt(wc.now) == phaseGone {
					continue
				}
				var coll string
				switch {
				case strings.HasPrefix(key, "vmssvm/"):
					for _, co := range instanceIPConfigs(en.cur) {
						if r, ok := propsOf(co)["subnet"].(obj); ok && strings.EqualFold(stringOf(r["id"]), id) {
							fn(g, co)
						}
					}
					continue
				case strings.HasPrefix(key, "loadbalancers/"):
					coll = "frontendIPConfigurations"
				case strings.HasPrefix(key, "networkinterfaces/"), strings.HasPrefix(key, "privatelinkservices/"):
					coll = "ipConfigurations"
				case strings.HasPrefix(key, "privateendpoints/"):
					if co := endpointIPConfig(en.cur); co != nil {
						if r, ok := propsOf(co)["subnet"].(obj); ok && strings.EqualFold(stringOf(r["id"]), id) {
							fn(g, co)
						}
					}
					continue
				default:
					continue
				}
				arr, _ := propsOf(en.cur.doc)[coll].([]any)
				for _, c := range arr {
					co := c.(obj)
					if r, ok := propsOf(co)["subnet"].(obj); ok && strings.EqualFold(r["id"].(string), id) {
						fn(g, co)
					}
				}
			}
		}
	}
}

// subnetUsers lists the ids of LB frontends and NIC ip configurations that
// reference subnet id, in groups that are not deleted.
func (wc *writeCtx) subnetUsers(id string) []string {
	var users []string
	wc.subnetIPConfigs(id, func(g *group, cfg obj) {
		if !g.goneAt(wc.now) {
			users = append(users, cfg["id"].(string))
		}
	})
	return users
}

func checkDeleteSubnet(wc *writeCtx, parent obj, child obj) *armError {
	id, _ := child["id"].(string)
	if users := wc.subnetUsers(id); len(users) > 0 {
		name, _ := child["name"].(string)
		return nrpError(http.StatusBadRequest, "InUseSubnetCannotBeDeleted",
			"Subnet %s is in use by %s and cannot be deleted. In order to delete the subnet, delete all the resources within the subnet. See aka.ms/deletesubnet.", name, users[0])
	}
	return nil
}

func checkDeleteVNet(wc *writeCtx, v *version) *armError {
	arr, _ := propsOf(v.doc)["subnets"].([]any)
	for _, s := range arr {
		if ae := checkDeleteSubnet(wc, v.doc, s.(obj)); ae != nil {
			ae.code = "InUseSubnetCannotBeDeleted"
			return ae
		}
	}
	return nil
}

// usedPrivateIPs collects private addresses held in subnet id.
func (wc *writeCtx) usedPrivateIPs(id string) map[netip.Addr]bool {
	used := map[netip.Addr]bool{}
	wc.subnetIPConfigs(id, func(_ *group, cfg obj) {
		if a, err := netip.ParseAddr(stringOf(propsOf(cfg)["privateIPAddress"])); err == nil {
			used[a] = true
		}
	})
	return used
}

func stringOf(v any) string {
	s, _ := v.(string)
	return s
}

// subnetPrefix returns the first IPv4 (or, with v6, IPv6) prefix of a subnet.
func subnetPrefix(cp obj, v6 bool) (netip.Prefix, bool) {
	var list []string
	if a, ok := cp["addressPrefix"].(string); ok {
		list = append(list, a)
	}
	if arr, ok := cp["addressPrefixes"].([]any); ok {
		for _, v := range arr {
			if a, ok := v.(string); ok {
				list = append(list, a)
			}
		}
	}
	for _, a := range list {
		if p, err := netip.ParsePrefix(a); err == nil && p.Addr().Is6() == v6 {
			return p.Masked(), true
		}
	}
	return netip.Prefix{}, false
}

// assignPrivateIP validates or allocates the private address of an ip
// configuration (LB frontend or NIC) in subnet sp. keep is the address it
// held before, if any.
func (wc *writeCtx) assignPrivateIP(cp obj, subnetID string, subnetProps obj, ownerID, keep, path string, taken map[netip.Addr]bool) *armError {
	method, ae := enumProp(cp, "privateIPAllocationMethod", path, "Dynamic", "Dynamic", "Static")
	if ae != nil {
		return ae
	}
	ver, ae := enumProp(cp, "privateIPAddressVersion", path, "IPv4", "IPv4", "IPv6")
	if ae != nil {
		return ae
	}
	sp, ok := subnetPrefix(subnetProps, ver == "IPv6")
	if !ok {
		return nrpError(http.StatusBadRequest, "PrivateIPAddressVersionNotSupportedBySubnet",
			"Subnet %s referenced by %s has no %s address prefix.", subnetID, ownerID, ver)
	}
	used := wc.usedPrivateIPs(subnetID)
	for a := range taken {
		used[a] = true
	}
	if method == "Static" {
		s, _, err := getStr(cp, "privateIPAddress", path)
		if err != nil {
			return errBadShape(err)
		}
		a, perr := netip.ParseAddr(s)
		if perr != nil {
			return nrpError(http.StatusBadRequest, "PrivateIPAddressInvalid",
				"Private static IP address '%s' of %s is not a valid IP address.", s, ownerID)
		}
		if !sp.Contains(a) {
			return nrpError(http.StatusBadRequest, "PrivateIPAddressNotInSubnet",
				"IP configuration %s references the subnet %s but its private IP address %s does not belong to that subnet.", ownerID, subnetID, s)
		}
		if used[a] && a.String() != keep {
			return nrpError(http.StatusBadRequest, "PrivateIPAddressInUse",
				"IP configuration %s is using the private IP address %s which is already allocated to another resource.", ownerID, s)
		}
		taken[a] = true
		return nil
	}
	if k, err := netip.ParseAddr(keep); err == nil && sp.Contains(k) {
		cp["privateIPAddress"] = keep
		taken[k] = true
		return nil
	}
	a, ok := privateAlloc(sp, used)
	if !ok {
		return nrpError(http.StatusBadRequest, "SubnetIsFull",
			"Subnet %s with address prefix %s does not have enough capacity for 1 IP address.", subnetID, sp)
	}
	cp["privateIPAddress"] = a.String()
	taken[a] = true
	return nil
}
