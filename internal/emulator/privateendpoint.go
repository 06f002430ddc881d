package emulator

import (
	"net/netip"
	"strings"
)

// Private endpoints (Microsoft.Network/privateEndpoints) to private link
// services: one connection each, automatic (privateLinkServiceConnections,
// approved at once when the requester may: same subscription as the
// service, as recorded, or listed in its autoApproval) or manual
// (manualPrivateLinkServiceConnections, Pending until the service's owner
// decides). The endpoint's address is allocated in its subnet; ARM shows it
// only on the endpoint's network interface, which the emulator does not
// serve, and in customDnsConfigs when the service has fqdns.

const (
	peType     = "Microsoft.Network/privateEndpoints"
	peConnType = peType + "/privateLinkServiceConnections"
	peAutoKey  = "privateLinkServiceConnections"
	peManKey   = "manualPrivateLinkServiceConnections"
	peAddrKey  = hiddenPrefix + "address"
	peLinkKey  = hiddenPrefix + "plsConnection" // the id of the service's side of the connection
)

func init() {
	registerKind(&kindSpec{
		typ: "privateEndpoints", fullType: peType,
		collections: []*collSpec{
			{key: peAutoKey, fullType: peConnType},
			{key: peManKey, fullType: peConnType},
		},
		normalize: normalizePE,
		decorate:  decoratePE,
		onDelete:  onDeletePE,
	})
}

func normalizePE(wc *writeCtx, in obj, name string, old *version) (obj, *armError) {
	doc, props, ae := baseDoc(wc, kinds["privateendpoints"], in, name, old, true)
	if ae != nil {
		return nil, ae
	}
	dropHidden(props, "networkInterfaces", "customDnsConfigs", "provisioningState", "resourceGuid")
	id := stringOf(doc["id"])
	loc := stringOf(doc["location"])
	var oldProps obj
	if old != nil {
		oldProps = propsOf(old.doc)
	}

	sid, ok, err := getRef(props, "subnet", "properties")
	if err != nil {
		return nil, errBadShape(err)
	}
	if !ok {
		return nil, errPLS("PrivateEndpointSubnetRequired", "Private endpoint %s must reference a subnet (properties.subnet).", id)
	}
	vv, sub := wc.lookupChild(sid, "virtualNetworks", "subnets")
	if sub == nil || stringOf(vv.doc["location"]) != loc {
		return nil, errInvalidReference(sid, id)
	}
	canonSubnet := stringOf(sub["id"])
	if oldProps != nil {
		if os, _ := oldProps["subnet"].(obj); !strings.EqualFold(stringOf(os["id"]), canonSubnet) {
			return nil, errPLS("PrivateEndpointSubnetCannotBeChanged", "The subnet of private endpoint %s cannot be changed.", id)
		}
	}
	props["subnet"] = ref(canonSubnet)
	if cfgs, _, err := getArr(props, "ipConfigurations", "properties"); err != nil {
		return nil, errBadShape(err)
	} else if len(cfgs) > 0 {
		return nil, errPLS("PrivateEndpointStaticIPConfigurationsNotSupported",
			"Private endpoint %s: static ipConfigurations are not emulated; leave properties.ipConfigurations empty.", id)
	}
	props["ipConfigurations"] = []any{}
	if v6, _, err := getBool(props, "isIPv6EnabledPrivateEndpoint", "properties"); err != nil {
		return nil, errBadShape(err)
	} else if v6 {
		return nil, errPLS("PrivateEndpointIPv6NotSupported", "Private endpoint %s: private link services serve IPv4 only.", id)
	}
	props["isIPv6EnabledPrivateEndpoint"] = false
	if _, _, err := getStr(props, "customNetworkInterfaceName", "properties"); err != nil {
		return nil, errBadShape(err)
	}
	setDefault(props, "customNetworkInterfaceName", "")

	auto, ae := normChildren(props, peAutoKey, id, peConnType, "properties", []string{"privateLinkServiceConnectionState"}, nil)
	if ae != nil {
		return nil, ae
	}
	manual, ae := normChildren(props, peManKey, id, peConnType, "properties", []string{"privateLinkServiceConnectionState"}, nil)
	if ae != nil {
		return nil, ae
	}
	if len(auto)+len(manual) != 1 {
		return nil, errPLS("PrivateEndpointMustHaveOneConnection",
			"Private endpoint %s must have exactly one private link service connection (it has %d).", id, len(auto)+len(manual))
	}
	isManual := len(manual) == 1
	conn := append(auto, manual...)[0].(obj)
	cp := propsOf(conn)
	plsRef, _, err := getStr(cp, "privateLinkServiceId", "properties."+peAutoKey+"[0].properties")
	if err != nil {
		return nil, errBadShape(err)
	}
	dropHidden(cp)
	_, plsV := wc.lookupKind(plsRef, "privateLinkServices")
	if plsV == nil {
		return nil, errInvalidReference(plsRef, id)
	}
	plsID := stringOf(plsV.doc["id"])
	cp["privateLinkServiceId"] = plsID
	if gids, has, err := getArr(cp, "groupIds", "properties"); err != nil {
		return nil, errBadShape(err)
	} else if has && len(gids) > 0 {
		return nil, errPLS("PrivateEndpointGroupIdsNotAllowedForPrivateLinkService",
			"Private endpoint %s: groupIds are not used with a private link service.", id)
	}

	var addr, link string
	var state obj
	var dns []any
	if oldProps != nil {
		oc := oldConnection(oldProps)
		if oc == nil || !strings.EqualFold(stringOf(propsOf(oc)["privateLinkServiceId"]), plsID) ||
			!strings.EqualFold(stringOf(oc["name"]), stringOf(conn["name"])) || (findChild(oldProps, peManKey, stringOf(oc["name"])) != nil) != isManual {
			return nil, errPLS("PrivateEndpointConnectionCannotBeChanged",
				"The private link service connection of private endpoint %s cannot be changed; create another private endpoint.", id)
		}
		op := propsOf(oc)
		state, _ = op["privateLinkServiceConnectionState"].(obj)
		link = stringOf(op[peLinkKey])
		addr = stringOf(oldProps[peAddrKey])
		dns = asList(oldProps["customDnsConfigs"])
	} else {
		pp := propsOf(plsV.doc)
		plsSub := ""
		if a, ok := parseResourceID(plsID); ok {
			plsSub = a.sub
		}
		same := strings.EqualFold(plsSub, wc.s.id)
		var vis, autoSubs []string
		if o, ok := pp["visibility"].(obj); ok {
			for _, s := range asList(o["subscriptions"]) {
				vis = append(vis, stringOf(s))
			}
		}
		if o, ok := pp["autoApproval"].(obj); ok {
			for _, s := range asList(o["subscriptions"]) {
				autoSubs = append(autoSubs, stringOf(s))
			}
		}
		if !same && !containsFold(vis, "*") && !containsFold(vis, wc.s.id) {
			return nil, errPLS("PrivateLinkServiceNotVisibleToSubscription",
				"Private link service %s is not visible to subscription %s.", plsID, wc.s.id)
		}
		approved := same || containsFold(autoSubs, wc.s.id)
		switch {
		case isManual:
			state = connState(connPending, "")
		case approved:
			state = connState(connApproved, autoApprovedD)
		default:
			return nil, errPLS("PrivateEndpointConnectionRequiresManualApproval",
				"Subscription %s may not connect to private link service %s without approval: use manualPrivateLinkServiceConnections.", wc.s.id, plsID)
		}
		a, ae := wc.allocEndpointAddr(canonSubnet, propsOf(sub), id)
		if ae != nil {
			return nil, ae
		}
		addr = a
		dns = []any{}
		for _, f := range asList(pp["fqdns"]) {
			dns = append(dns, obj{"fqdn": f, "ipAddresses": []any{addr}})
		}
		pc := plsConnection(wc, plsID, id, name, loc, addr, state)
		link = stringOf(pc["id"])
		wc.after(func() {
			wc.updatePLSConnections(plsID, func(conns []any) []any { return append(conns, pc) })
		})
	}
	cp["privateLinkServiceConnectionState"] = state
	cp[peLinkKey] = link
	if isManual {
		props[peAutoKey], props[peManKey] = []any{}, manual
	} else {
		props[peAutoKey], props[peManKey] = auto, []any{}
	}
	props[peAddrKey] = addr
	props["customDnsConfigs"] = dns
	keepGUID(wc, props, old)
	if oldProps != nil {
		props["networkInterfaces"] = oldProps["networkInterfaces"]
	} else {
		props["networkInterfaces"] = []any{ref("/subscriptions/" + wc.s.id + "/resourceGroups/" + wc.g.name +
			"/providers/Microsoft.Network/networkInterfaces/" + name + ".nic." + wc.e.ids.uuid())}
	}
	doc["properties"] = props
	return doc, nil
}

// oldConnection is the one connection a stored private endpoint has.
func oldConnection(props obj) obj {
	for _, key := range []string{peAutoKey, peManKey} {
		for _, c := range asList(props[key]) {
			return c.(obj)
		}
	}
	return nil
}

// allocEndpointAddr allocates a private endpoint's address in its subnet.
func (wc *writeCtx) allocEndpointAddr(subnetID string, subnetProps obj, ownerID string) (string, *armError) {
	cp := obj{"privateIPAllocationMethod": "Dynamic"}
	if ae := wc.assignPrivateIP(cp, subnetID, subnetProps, ownerID, "", "properties", map[netip.Addr]bool{}); ae != nil {
		return "", ae
	}
	return stringOf(cp["privateIPAddress"]), nil
}

// endpointIPConfig is the private endpoint's address as an ip
// configuration in its subnet (for address allocation and subnet use).
func endpointIPConfig(v *version) obj {
	p := propsOf(v.doc)
	if stringOf(p[peAddrKey]) == "" {
		return nil
	}
	return obj{"id": stringOf(v.doc["id"]), "properties": obj{"subnet": p["subnet"], "privateIPAddress": p[peAddrKey]}}
}

func decoratePE(tree obj) {
	p := propsOf(tree)
	dropHidden(p)
	for _, key := range []string{peAutoKey, peManKey} {
		for _, c := range asList(p[key]) {
			dropHidden(propsOf(c.(obj)))
		}
	}
}

// onDeletePE takes the endpoint's connection off its private link service.
func onDeletePE(wc *writeCtx, v *version) {
	oc := oldConnection(propsOf(v.doc))
	if oc == nil {
		return
	}
	op := propsOf(oc)
	link := stringOf(op[peLinkKey])
	wc.updatePLSConnections(stringOf(op["privateLinkServiceId"]), func(conns []any) []any {
		out := conns[:0]
		for _, c := range conns {
			if !strings.EqualFold(stringOf(c.(obj)["id"]), link) {
				out = append(out, c)
			}
		}
		return out
	})
}

// setEndpointConnectionState mirrors a connection state the service's
// owner set onto the private endpoint.
func (wc *writeCtx) setEndpointConnectionState(peID, plsID string, state obj) {
	en, v := wc.lookupKind(peID, "privateEndpoints")
	if v == nil {
		return
	}
	p := shallowCopy(propsOf(v.doc))
	changed := false
	for _, key := range []string{peAutoKey, peManKey} {
		arr := asList(p[key])
		na := make([]any, len(arr))
		for i, c := range arr {
			co := c.(obj)
			if strings.EqualFold(stringOf(propsOf(co)["privateLinkServiceId"]), plsID) {
				co = shallowCopy(co)
				cp := shallowCopy(propsOf(co))
				cp["privateLinkServiceConnectionState"] = state
				co["properties"] = cp
				changed = true
			}
			na[i] = co
		}
		p[key] = na
	}
	if !changed {
		return
	}
	doc := shallowCopy(v.doc)
	doc["properties"] = p
	wc.replace(en, doc)
}
