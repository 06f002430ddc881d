package emulator

import (
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/azlb/azlb/internal/emulator/dataplane"
)

// Private Link Services (Microsoft.Network/privateLinkServices): NAT ip
// configurations in a subnet, the load balancer frontend they serve,
// visibility, auto-approval, fqdns, proxy protocol, and the private
// endpoint connections private endpoints open to them. What ARM's answers
// do not show (error codes for a frontend in use, more than 8 NAT ip
// configurations, and so on) follows the strictest reading, written down in
// docs/emulator.md (Private Link).

const (
	plsType       = "Microsoft.Network/privateLinkServices"
	plsIPCfgType  = plsType + "/ipConfigurations"
	plsConnType   = plsType + "/privateEndpointConnections"
	plsMaxIPCfg   = 8
	plsConnsKey   = "privateEndpointConnections"
	plsFrontKey   = "loadBalancerFrontendIpConfigurations"
	hiddenPrefix  = "_" // stored members that are never rendered
	connApproved  = "Approved"
	connPending   = "Pending"
	connRejected  = "Rejected"
	connRemoved   = "Removed"
	connGone      = "Disconnected" // what a private endpoint shows once its connection is deleted
	autoApprovedD = "Auto Approved"
)

// plsReadOnly are the members ARM computes; a PUT that sends them back is
// not refused, they are replaced by the stored values.
var plsReadOnly = []string{"alias", "networkInterfaces", plsConnsKey, "provisioningState", "resourceGuid"}

var plsConnColl = &collSpec{
	key: plsConnsKey, fullType: plsConnType, routable: true,
	putChild:         putPLSConnection,
	afterDeleteChild: afterDeletePLSConnection,
}

func init() {
	registerKind(&kindSpec{
		typ: "privateLinkServices", fullType: plsType,
		collections: []*collSpec{
			{key: "ipConfigurations", fullType: plsIPCfgType},
			plsConnColl,
		},
		normalize:   normalizePLS,
		decorate:    decoratePLS,
		checkDelete: checkDeletePLS,
		onDelete:    onDeletePLS,
	})
}

// errPLS is an NRP 400 with the given code.
func errPLS(code, format string, args ...any) *armError {
	return nrpError(http.StatusBadRequest, code, format, args...)
}

func normalizePLS(wc *writeCtx, in obj, name string, old *version) (obj, *armError) {
	doc, props, ae := baseDoc(wc, kinds["privatelinkservices"], in, name, old, true)
	if ae != nil {
		return nil, ae
	}
	dropHidden(props, plsReadOnly...)
	id := stringOf(doc["id"])
	loc := stringOf(doc["location"])
	var oldProps obj
	if old != nil {
		oldProps = propsOf(old.doc)
	}

	// The frontend it serves.
	fes, has, err := getRefList(props, plsFrontKey, "properties")
	if err != nil {
		return nil, errBadShape(err)
	}
	if !has || len(fes) == 0 {
		return nil, errPLS("PrivateLinkServiceMissingLoadBalancerFrontendIpConfigurations",
			"Private link service %s must reference at least one load balancer frontend IP configuration.", id)
	}
	canonFE := make([]string, 0, len(fes))
	lbOf := ""
	for _, fid := range fes {
		lv, fe := wc.lookupChild(fid, "loadBalancers", "frontendIPConfigurations")
		if fe == nil || stringOf(lv.doc["location"]) != loc {
			return nil, errInvalidReference(fid, id)
		}
		if s, _ := lv.doc["sku"].(obj); stringOf(s["name"]) != "Standard" {
			return nil, errPLS("PrivateLinkServiceNotSupportedOnNonStandardLoadBalancer",
				"Private link service %s cannot reference frontend %s: only Standard load balancers support private link services.", id, fid)
		}
		if frontendIsIPv6(wc, fe) {
			return nil, errPLS("PrivateLinkServiceNotSupportedOnIPv6Frontend",
				"Private link service %s cannot reference frontend %s: private link services support IPv4 frontends only.", id, fid)
		}
		cfid := stringOf(fe["id"])
		if lbOf != "" && !strings.EqualFold(lbOf, stringOf(lv.doc["id"])) {
			return nil, errPLS("PrivateLinkServiceFrontendsOnDifferentLoadBalancers",
				"Private link service %s references frontends of more than one load balancer.", id)
		}
		lbOf = stringOf(lv.doc["id"])
		if user := wc.frontendPLS(cfid); user != "" && !strings.EqualFold(user, id) {
			return nil, errPLS("LoadBalancerFrontendIpConfigurationInUseByAnotherPrivateLinkService",
				"Frontend IP configuration %s is already used by private link service %s.", cfid, user)
		}
		canonFE = append(canonFE, cfid)
	}
	if oldProps != nil {
		for _, r := range asList(oldProps[plsFrontKey]) {
			oldLB := lbOfFrontend(stringOf(r.(obj)["id"]))
			if !strings.EqualFold(oldLB, lbOf) {
				return nil, errPLS("PrivateLinkServiceLoadBalancerCannotBeChanged",
					"The load balancer of private link service %s cannot be changed from %s to %s.", id, oldLB, lbOf)
			}
		}
	}
	props[plsFrontKey] = refList(canonFE)

	// NAT ip configurations.
	var oldCfgs obj
	if oldProps != nil {
		oldCfgs = obj{"ipConfigurations": oldProps["ipConfigurations"]}
	}
	primaries := 0
	subnetOf := ""
	taken := map[netip.Addr]bool{}
	cfgs, ae := normChildren(props, "ipConfigurations", id, plsIPCfgType, "properties", nil,
		func(cname, cid string, cp obj, path string) *armError {
			sid, ok, err := getRef(cp, "subnet", path)
			if err != nil {
				return errBadShape(err)
			}
			if !ok {
				return errPLS("PrivateLinkServiceIpConfigurationSubnetRequired",
					"IP configuration %s of private link service %s must reference a subnet.", cid, id)
			}
			vv, sub := wc.lookupChild(sid, "virtualNetworks", "subnets")
			if sub == nil || stringOf(vv.doc["location"]) != loc {
				return errInvalidReference(sid, id)
			}
			canon := stringOf(sub["id"])
			if !strings.EqualFold(stringOf(propsOf(sub)["privateLinkServiceNetworkPolicies"]), "Disabled") {
				return errPLS("PrivateLinkServiceCannotBeCreatedInSubnetThatHasNetworkPoliciesEnabled",
					"Private link service %s cannot be created in a subnet %s since it has private link service network policies enabled.", id, canon)
			}
			if subnetOf != "" && !strings.EqualFold(subnetOf, canon) {
				return errPLS("PrivateLinkServiceIpConfigurationsInDifferentSubnets",
					"All IP configurations of private link service %s must be in one subnet.", id)
			}
			subnetOf = canon
			cp["subnet"] = ref(canon)
			if p, ok, err := getBool(cp, "primary", path); err != nil {
				return errBadShape(err)
			} else if ok && p {
				primaries++
			}
			setDefault(cp, "primary", false)
			if ver, ae := enumProp(cp, "privateIPAddressVersion", path, "IPv4", "IPv4", "IPv6"); ae != nil {
				return ae
			} else if ver != "IPv4" {
				return errPLS("PrivateLinkServiceIpConfigurationIPv6NotSupported",
					"IP configuration %s of private link service %s: only IPv4 NAT addresses are supported.", cid, id)
			}
			keep := ""
			if oldCfgs != nil {
				if oc := findChild(oldCfgs, "ipConfigurations", cname); oc != nil {
					op := propsOf(oc)
					if osub, _ := op["subnet"].(obj); !strings.EqualFold(stringOf(osub["id"]), canon) {
						return errPLS("PrivateLinkServiceIpConfigurationSubnetCannotBeChanged",
							"The subnet of IP configuration %s of private link service %s cannot be changed.", cid, id)
					}
					// Its own address: a Static one may be sent again (an
					// update), a Dynamic one is kept.
					keep = stringOf(op["privateIPAddress"])
				}
			}
			return wc.assignPrivateIP(cp, canon, propsOf(sub), cid, keep, path, taken)
		})
	if ae != nil {
		return nil, ae
	}
	if len(cfgs) == 0 {
		return nil, errPLS("PrivateLinkServiceIpConfigurationsRequired",
			"Private link service %s must have at least one IP configuration.", id)
	}
	if len(cfgs) > plsMaxIPCfg {
		return nil, errPLS("PrivateLinkServiceIpConfigurationCountExceedsLimit",
			"Private link service %s has %d IP configurations; at most %d are allowed.", id, len(cfgs), plsMaxIPCfg)
	}
	if primaries != 1 {
		return nil, errPLS("PrivateLinkServiceMustHaveOnePrimaryIpConfiguration",
			"Private link service %s must have exactly one primary IP configuration (it has %d).", id, primaries)
	}
	if oldCfgs != nil {
		for _, oc := range asList(oldCfgs["ipConfigurations"]) {
			n := stringOf(oc.(obj)["name"])
			if findChild(obj{"ipConfigurations": cfgs}, "ipConfigurations", n) == nil {
				return nil, errPLS("PrivateLinkServiceIpConfigurationCannotBeDeleted",
					"IP configuration %s of private link service %s cannot be deleted once added.", stringOf(oc.(obj)["id"]), id)
			}
		}
	}
	props["ipConfigurations"] = cfgs

	// Visibility, auto-approval, fqdns, proxy protocol.
	vis, ae := plsSubscriptions(props, "visibility", true)
	if ae != nil {
		return nil, ae
	}
	auto, ae := plsSubscriptions(props, "autoApproval", false)
	if ae != nil {
		return nil, ae
	}
	if auto != nil && !containsFold(vis, "*") {
		for _, s := range auto {
			if !containsFold(vis, s) {
				return nil, errPLS("PrivateLinkServiceAutoApprovalNotSubsetOfVisibility",
					"Subscription %s of autoApproval of private link service %s is not in its visibility.", s, id)
			}
		}
	}
	fq, has, err := getArr(props, "fqdns", "properties")
	if err != nil {
		return nil, errBadShape(err)
	}
	out := make([]any, 0, len(fq))
	if has {
		for i, v := range fq {
			s, ok := v.(string)
			if !ok || strings.TrimSpace(s) == "" {
				return nil, errBadShape(&fieldError{indexPath("properties.fqdns", i), "expected a non-empty string"})
			}
			out = append(out, s)
		}
	}
	props["fqdns"] = out
	if _, _, err := getBool(props, "enableProxyProtocol", "properties"); err != nil {
		return nil, errBadShape(err)
	}
	setDefault(props, "enableProxyProtocol", false)
	if m, ok, err := getStr(props, "accessMode", "properties"); err != nil {
		return nil, errBadShape(err)
	} else if ok && m != "" {
		if _, ae := enumProp(props, "accessMode", "properties", "", "Default", "Restricted"); ae != nil {
			return nil, ae
		}
	}
	if d, ok, err := getStr(props, "destinationIPAddress", "properties"); err != nil {
		return nil, errBadShape(err)
	} else if ok && d != "" {
		return nil, errPLS("PrivateLinkServiceDestinationIPAddressNotSupported",
			"Private link service %s: destinationIPAddress (Private Link Service Direct Connect) is not emulated.", id)
	}

	// Computed members, kept across updates.
	keepGUID(wc, props, old)
	if oldProps != nil {
		props["alias"] = oldProps["alias"]
		props["networkInterfaces"] = oldProps["networkInterfaces"]
		props[plsConnsKey] = oldProps[plsConnsKey]
	} else {
		g := wc.e.ids.uuid()
		props["alias"] = strings.ToLower(name) + "." + g + "." + loc + ".azure.privatelinkservice"
		props["networkInterfaces"] = []any{ref("/subscriptions/" + wc.s.id + "/resourceGroups/" + wc.g.name +
			"/providers/Microsoft.Network/networkInterfaces/" + name + ".nic." + wc.e.ids.uuid())}
		props[plsConnsKey] = []any{}
	}
	doc["properties"] = props
	return doc, nil
}

// plsSubscriptions validates visibility or autoApproval: {"subscriptions":
// [...]} of subscription ids ("*" allowed in visibility only). It returns
// nil when the member is absent.
func plsSubscriptions(props obj, key string, starOK bool) ([]string, *armError) {
	o, err := getObj(props, key, "properties")
	if err != nil {
		return nil, errBadShape(err)
	}
	if o == nil {
		delete(props, key)
		return nil, nil
	}
	arr, _, err := getArr(o, "subscriptions", joinPath("properties", key))
	if err != nil {
		return nil, errBadShape(err)
	}
	out := make([]string, 0, len(arr))
	for i, v := range arr {
		s, ok := v.(string)
		p := indexPath("properties."+key+".subscriptions", i)
		if !ok {
			return nil, errBadShape(&fieldError{p, "expected a string, got " + jsonKind(v)})
		}
		if s == "*" && starOK {
			out = append(out, s)
			continue
		}
		if !isGUID(s) {
			return nil, errPLS("InvalidSubscriptionId",
				"%s: '%s' is not a valid subscription id.", p, s)
		}
		out = append(out, s)
	}
	list := make([]any, len(out))
	for i, s := range out {
		list[i] = s
	}
	props[key] = obj{"subscriptions": list}
	return out, nil
}

// frontendIsIPv6 reports whether a load balancer frontend carries IPv6.
func frontendIsIPv6(wc *writeCtx, fe obj) bool {
	p := propsOf(fe)
	if strings.EqualFold(stringOf(p["privateIPAddressVersion"]), "IPv6") {
		return true
	}
	if r, ok := p["publicIPAddress"].(obj); ok {
		if _, v := wc.lookupKind(stringOf(r["id"]), "publicIPAddresses"); v != nil {
			return strings.EqualFold(stringOf(propsOf(v.doc)["publicIPAddressVersion"]), "IPv6")
		}
	}
	return false
}

// lbOfFrontend is the load balancer id of a frontend id.
func lbOfFrontend(fid string) string {
	if i := strings.Index(strings.ToLower(fid), "/frontendipconfigurations/"); i > 0 {
		return fid[:i]
	}
	return fid
}

// eachPLS calls fn with every live private link service in the emulator.
func (wc *writeCtx) eachPLS(fn func(g *group, en *entry, v *version) bool) {
	for _, s := range wc.e.subs {
		for _, g := range s.groups {
			if g.goneAt(wc.now) {
				continue
			}
			for key, en := range g.resources {
				if !strings.HasPrefix(key, "privatelinkservices/") || en.cur == nil || en.cur.phaseAt(wc.now) == phaseGone || en.cur.deleting {
					continue
				}
				if !fn(g, en, en.cur) {
					return
				}
			}
		}
	}
}

// frontendPLS returns the id of the private link service that uses
// frontend fid, "" when none does.
func (wc *writeCtx) frontendPLS(fid string) string {
	user := ""
	wc.eachPLS(func(_ *group, _ *entry, v *version) bool {
		for _, r := range asList(propsOf(v.doc)[plsFrontKey]) {
			if strings.EqualFold(stringOf(r.(obj)["id"]), fid) {
				user = stringOf(v.doc["id"])
				return false
			}
		}
		return true
	})
	return user
}

// checkFrontendsRemovable refuses removing (or deleting the load balancer
// of) a frontend a private link service uses. ARM's code for this is not
// recorded; the emulator's is its own (docs/emulator.md).
func (wc *writeCtx) checkFrontendsRemovable(lbID string, removed []string) *armError {
	for _, fid := range removed {
		if user := wc.frontendPLS(fid); user != "" {
			return errPLS("LoadBalancerFrontendIpConfigurationInUseByPrivateLinkService",
				"Frontend IP configuration %s of load balancer %s is used by private link service %s and cannot be removed. Delete the private link service first.", fid, lbID, user)
		}
	}
	return nil
}

// droppedFrontends lists the ids of old's frontends missing from now.
func droppedFrontends(old, now []any) []string {
	var out []string
	for _, o := range old {
		id := stringOf(o.(obj)["id"])
		found := false
		for _, n := range now {
			if strings.EqualFold(stringOf(n.(obj)["id"]), id) {
				found = true
				break
			}
		}
		if !found {
			out = append(out, id)
		}
	}
	return out
}

// decoratePLS hides what ARM does not show: the address of a Dynamic NAT
// ip configuration (the recordings show none; it is on the service's
// network interface) and the emulator's own members.
func decoratePLS(tree obj) {
	p := propsOf(tree)
	dropHidden(p)
	for _, c := range asList(p["ipConfigurations"]) {
		cp := propsOf(c.(obj))
		if stringOf(cp["privateIPAllocationMethod"]) != "Static" {
			delete(cp, "privateIPAddress")
		}
	}
	for _, c := range asList(p[plsConnsKey]) {
		dropHidden(propsOf(c.(obj)))
	}
}

// dropHidden deletes the emulator's own members (hiddenPrefix) and the
// read-only keys from props.
func dropHidden(props obj, readOnly ...string) {
	for _, k := range readOnly {
		delete(props, k)
	}
	for k := range props {
		if strings.HasPrefix(k, hiddenPrefix) {
			delete(props, k)
		}
	}
}

// checkDeletePLS refuses deleting a private link service that still has
// private endpoint connections (other than Removed ones): ARM's behaviour
// is not recorded, the strictest reading is taken (docs/emulator.md).
func checkDeletePLS(wc *writeCtx, v *version) *armError {
	for _, c := range asList(propsOf(v.doc)[plsConnsKey]) {
		st := connStatus(propsOf(c.(obj)))
		if st != connRemoved {
			return errPLS("CannotDeletePrivateLinkServiceWithPrivateEndpointConnections",
				"Private link service %s cannot be deleted while it has private endpoint connections (%s is %s). Delete the connections first.",
				stringOf(v.doc["id"]), stringOf(c.(obj)["id"]), st)
		}
	}
	return nil
}

// onDeletePLS tells the endpoints of the connections a deleted service
// still listed (Removed ones, or all when its resource group goes) that
// they are disconnected.
func onDeletePLS(wc *writeCtx, v *version) {
	id := stringOf(v.doc["id"])
	for _, c := range asList(propsOf(v.doc)[plsConnsKey]) {
		cp := propsOf(c.(obj))
		if r, ok := cp["privateEndpoint"].(obj); ok {
			wc.setEndpointConnectionState(stringOf(r["id"]), id, connState(connGone, "The private link service was deleted."))
		}
	}
}

func connStatus(cp obj) string {
	s, _ := cp["privateLinkServiceConnectionState"].(obj)
	return stringOf(s["status"])
}

func connState(status, desc string) obj {
	return obj{"status": status, "description": desc, "actionsRequired": "None"}
}

// putPLSConnection updates the state of a private endpoint connection (the
// service owner approves, rejects or removes it). The connection must
// exist (private endpoints create them); only privateLinkServiceConnectionState
// may change, and a Rejected or Removed connection stays so.
func putPLSConnection(wc *writeCtx, parent obj, name string, in obj, existing obj) (obj, *armError) {
	cid, _, cp, ae := childIn(parent, plsConnsKey, name, in, existing)
	if ae != nil {
		return nil, ae
	}
	if existing == nil {
		return nil, errChildNotFound(cid)
	}
	st, err := getObj(cp, "privateLinkServiceConnectionState", "properties")
	if err != nil {
		return nil, errBadShape(err)
	}
	if st == nil {
		return nil, errPLS("PrivateEndpointConnectionStateRequired",
			"Private endpoint connection %s: properties.privateLinkServiceConnectionState is required.", cid)
	}
	st = shallowCopy(st)
	status, ae := enumProp(st, "status", "properties.privateLinkServiceConnectionState", "", connApproved, connRejected, connRemoved, connPending)
	if ae != nil {
		return nil, ae
	}
	if status == "" {
		return nil, errPLS("PrivateEndpointConnectionStateRequired",
			"Private endpoint connection %s: properties.privateLinkServiceConnectionState.status is required.", cid)
	}
	ep := propsOf(existing)
	cur := connStatus(ep)
	switch {
	case cur == status:
	case status == connPending:
		return nil, errPLS("InvalidPrivateEndpointConnectionStateTransition",
			"Private endpoint connection %s cannot go from %s back to Pending.", cid, cur)
	case cur == connRejected || cur == connRemoved:
		return nil, errPLS("InvalidPrivateEndpointConnectionStateTransition",
			"Private endpoint connection %s is %s and cannot become %s; the private endpoint must be created again.", cid, cur, status)
	}
	desc, _, err := getStr(st, "description", "properties.privateLinkServiceConnectionState")
	if err != nil {
		return nil, errBadShape(err)
	}
	act, _, err := getStr(st, "actionsRequired", "properties.privateLinkServiceConnectionState")
	if err != nil {
		return nil, errBadShape(err)
	}
	if act == "" {
		act = "None"
	}
	np := shallowCopy(ep)
	delete(np, "provisioningState")
	np["privateLinkServiceConnectionState"] = obj{"status": status, "description": desc, "actionsRequired": act}
	peID := ""
	if r, ok := np["privateEndpoint"].(obj); ok {
		peID = stringOf(r["id"])
	}
	peState := status
	if status == connRemoved {
		peState = connGone
	}
	wc.after(func() { wc.setEndpointConnectionState(peID, stringOf(parent["id"]), connState(peState, desc)) })
	return obj{"name": existing["name"], "id": cid, "type": plsConnType, "properties": np}, nil
}

// afterDeletePLSConnection tells the private endpoint that its connection
// is gone: it shows Disconnected.
func afterDeletePLSConnection(wc *writeCtx, parent obj, child obj) {
	peID := ""
	if r, ok := propsOf(child)["privateEndpoint"].(obj); ok {
		peID = stringOf(r["id"])
	}
	wc.setEndpointConnectionState(peID, stringOf(parent["id"]), connState(connGone, "The private endpoint connection was deleted by the private link service owner."))
}

// plsConnection builds the connection a private link service lists for a
// private endpoint.
func plsConnection(wc *writeCtx, plsID, peID, peName, loc, addr string, state obj) obj {
	name := peName + "." + wc.e.ids.uuid()
	return obj{
		"name": name, "id": plsID + "/" + plsConnsKey + "/" + name, "type": plsConnType,
		"properties": obj{
			"privateEndpoint":                   ref(peID),
			"privateLinkServiceConnectionState": state,
			"linkIdentifier":                    strconv.FormatUint(uint64(wc.e.ids.float()*(1<<53)), 10),
			"privateEndpointLocation":           loc,
			hiddenPrefix + "address":            addr,
		},
	}
}

// updatePLSConnections replaces the connection list of a private link
// service through fn (which gets a copy).
func (wc *writeCtx) updatePLSConnections(plsID string, fn func(conns []any) []any) {
	en, v := wc.lookupKind(plsID, "privateLinkServices")
	if v == nil {
		return
	}
	p := shallowCopy(propsOf(v.doc))
	p[plsConnsKey] = fn(append([]any(nil), asList(p[plsConnsKey])...))
	doc := shallowCopy(v.doc)
	doc["properties"] = p
	wc.replace(en, doc)
}

// privateLinks lists the data plane's private links: every private
// endpoint whose connection is Approved, with its service's frontend
// address, NAT address and proxy protocol setting (state lock held).
func (e *Emulator) privateLinks(now time.Time) []dataplane.PrivateLink {
	var out []dataplane.PrivateLink
	for _, s := range e.subs {
		for _, g := range s.groups {
			if g.goneAt(now) {
				continue
			}
			for key, en := range g.resources {
				if !strings.HasPrefix(key, "privateendpoints/") || en.cur == nil || en.cur.deleting || en.cur.phaseAt(now) == phaseGone {
					continue
				}
				pp := propsOf(en.cur.doc)
				conn := oldConnection(pp)
				if conn == nil || connStatus(propsOf(conn)) != connApproved {
					continue
				}
				cp := propsOf(conn)
				pls := e.liveDoc(stringOf(cp["privateLinkServiceId"]), now)
				if pls == nil {
					continue
				}
				sp := propsOf(pls)
				l := dataplane.PrivateLink{ID: stringOf(en.cur.doc["id"]), ProxyProtocol: sp["enableProxyProtocol"] == true}
				l.Endpoint, _ = netip.ParseAddr(stringOf(pp[peAddrKey]))
				for _, c := range asList(sp["ipConfigurations"]) {
					if ip := propsOf(c.(obj)); ip["primary"] == true {
						l.NAT, _ = netip.ParseAddr(stringOf(ip["privateIPAddress"]))
					}
				}
				for _, c := range asList(sp[plsConnsKey]) {
					if strings.EqualFold(stringOf(c.(obj)["id"]), stringOf(cp[peLinkKey])) {
						n, _ := strconv.ParseUint(stringOf(propsOf(c.(obj))["linkIdentifier"]), 10, 64)
						l.LinkID = uint32(n)
					}
				}
				for _, f := range asList(sp[plsFrontKey]) {
					fid := stringOf(f.(obj)["id"])
					lb := e.liveDoc(lbOfFrontend(fid), now)
					if lb == nil {
						continue
					}
					if fe := findChild(propsOf(lb), "frontendIPConfigurations", fid[strings.LastIndexByte(fid, '/')+1:]); fe != nil {
						l.Frontend = e.frontendOf(propsOf(fe), now).addr
					}
				}
				out = append(out, l)
			}
		}
	}
	return out
}
