package emulator

import (
	"net/http"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"time"
)

// sgwState is what a ServiceGateway holds besides its document: the
// registered services and the address locations (node address -> pod
// address -> service names). It lives on the gateway's entry, so it ends
// with the gateway, and is guarded by Emulator.mu.
type sgwState struct {
	services map[string]*sgwService // lower(name)
	locs     map[netip.Addr]*sgwLocation
	// addrLoc indexes which location holds an address.
	addrLoc map[netip.Addr]netip.Addr
}

type sgwService struct {
	name      string
	typ       string // Inbound, Outbound or InboundOutbound
	isDefault bool
	pools     []sgwPool
	natGW     string
}

type sgwPool struct {
	id, name, vnet string
}

type sgwLocation struct {
	addrs map[netip.Addr][]string // sorted service names
}

func newSGWState() *sgwState {
	return &sgwState{services: map[string]*sgwService{}, locs: map[netip.Addr]*sgwLocation{}, addrLoc: map[netip.Addr]netip.Addr{}}
}

// sgwStateOf returns the state of a gateway entry, creating it.
func sgwStateOf(en *entry) *sgwState {
	st, _ := en.ext.(*sgwState)
	if st == nil {
		st = newSGWState()
		en.ext = st
	}
	return st
}

// Error codes of the ServiceGateway POSTs. The recordings show none of them:
// DuplicateLocationsInRequest, ServiceWithOverlayMappingsCannotBeDeleted and
// MultipleDefaultServicesNotAllowedInServiceGateway are NRP's codes as the
// upstream cloud provider reports them; the others are the emulator's own
// names for rejections whose NRP code is unknown (docs/emulator.md).
const (
	codeDuplicateLocations   = "DuplicateLocationsInRequest"
	codeOverlayMappings      = "ServiceWithOverlayMappingsCannotBeDeleted"
	codeMultipleDefaults     = "MultipleDefaultServicesNotAllowedInServiceGateway"
	codeInvalidAddress       = "InvalidServiceGatewayAddress"
	codeAddressFamily        = "AddressFamilyMismatchWithAddressLocation"
	codeDuplicateAddress     = "DuplicateAddressesInRequest"
	codeUnknownService       = "ServiceGatewayServiceNotFound"
	codeAddressInTwo         = "AddressInMultipleAddressLocations"
	codeDuplicateService     = "DuplicateServicesInRequest"
	codePoolInUse            = "LoadBalancerBackendPoolInUseByAnotherService"
	codePoolNotServiceSKU    = "LoadBalancerSkuNotSupportedByServiceGateway"
	codeLBInUseByGateway     = "LoadBalancerInUseByServiceGateway"
	codeInvalidServiceConfig = "InvalidServiceGatewayService"
	codeTooManyServices      = "TooManyServicesInRequest"
	// Egress (Outbound services and their NAT gateways).
	codeNatGatewayAttached    = "NatGatewayAttachedToServiceGateway"
	codeNatGatewayInUse       = "NatGatewayInUseByServiceGateway"
	codeNatGatewaySku         = "NatGatewayNotSupportedByServiceGateway"
	codeNatGatewayNotAttached = "NatGatewayNotAttachedToServiceGateway"
	codeMultipleOutbound      = "MultipleOutboundServicesForAddress"
)

func sgwBadRequest(code, format string, args ...any) *armError {
	return nrpError(http.StatusBadRequest, code, format, args...)
}

// updateAction reads a required FullUpdate/PartialUpdate member.
func updateAction(m obj, key, path string) (full bool, ae *armError) {
	v, has, err := getStr(m, key, path)
	if err != nil {
		return false, errBadShape(err)
	}
	if !has || v == "" {
		return false, errBadShape(&fieldError{joinPath(path, key), "is required (FullUpdate or PartialUpdate)"})
	}
	c, ok := enumValue(v, "FullUpdate", "PartialUpdate")
	if !ok {
		return false, errBadShape(&fieldError{joinPath(path, key), "value '" + v + "' is not one of FullUpdate, PartialUpdate"})
	}
	return c == "FullUpdate", nil
}

// canonIP parses an IP address (no zone) into its canonical form.
func canonIP(s string) (netip.Addr, bool) {
	a, err := netip.ParseAddr(strings.TrimSpace(s))
	if err != nil || a.Zone() != "" {
		return netip.Addr{}, false
	}
	return a.Unmap(), true
}

// locUpdate is one validated location of an updateAddressLocations request.
type locUpdate struct {
	loc   netip.Addr
	full  bool
	addrs []addrUpdate
}

type addrUpdate struct {
	addr     netip.Addr
	services []string // canonical names, sorted; empty removes the address
}

// applyUpdateAddressLocations validates an updateAddressLocations request
// against st and returns the function that applies it. Nothing changes
// unless the whole request is valid.
func applyUpdateAddressLocations(wc *writeCtx, st *sgwState, gw obj, in obj) (func(), *armError) {
	topFull, ae := updateAction(in, "action", "")
	if ae != nil {
		return nil, ae
	}
	arr, _, err := getArr(in, "addressLocations", "")
	if err != nil {
		return nil, errBadShape(err)
	}
	gwID := stringOf(gw["id"])
	seen := map[netip.Addr]bool{}
	updates := make([]locUpdate, 0, len(arr))
	for i, el := range arr {
		p := indexPath("addressLocations", i)
		lo, ok := el.(map[string]any)
		if !ok {
			return nil, errBadShape(&fieldError{p, "expected an object, got " + jsonKind(el)})
		}
		ls, _, err := getStr(lo, "addressLocation", p)
		if err != nil {
			return nil, errBadShape(err)
		}
		loc, ok := canonIP(ls)
		if !ok {
			return nil, sgwBadRequest(codeInvalidAddress, "%s.addressLocation '%s' of service gateway %s is not an IP address.", p, ls, gwID)
		}
		if seen[loc] {
			return nil, sgwBadRequest(codeDuplicateLocations, "Address location %s appears more than once in the request to service gateway %s.", loc, gwID)
		}
		seen[loc] = true
		full, ae := updateAction(lo, "addressUpdateAction", p)
		if ae != nil {
			return nil, ae
		}
		addrs, has, err := getArr(lo, "addresses", p)
		if err != nil {
			return nil, errBadShape(err)
		}
		if !has {
			return nil, errBadShape(&fieldError{joinPath(p, "addresses"), "is required (an empty array removes the location)"})
		}
		u := locUpdate{loc: loc, full: full, addrs: make([]addrUpdate, 0, len(addrs))}
		seenAddr := map[netip.Addr]bool{}
		for j, ael := range addrs {
			ap := indexPath(joinPath(p, "addresses"), j)
			ao, ok := ael.(map[string]any)
			if !ok {
				return nil, errBadShape(&fieldError{ap, "expected an object, got " + jsonKind(ael)})
			}
			as, _, err := getStr(ao, "address", ap)
			if err != nil {
				return nil, errBadShape(err)
			}
			a, ok := canonIP(as)
			if !ok {
				return nil, sgwBadRequest(codeInvalidAddress, "%s.address '%s' of service gateway %s is not an IP address.", ap, as, gwID)
			}
			if a.Is4() != loc.Is4() {
				return nil, sgwBadRequest(codeAddressFamily, "Address %s and its address location %s are of different IP families.", a, loc)
			}
			if seenAddr[a] {
				return nil, sgwBadRequest(codeDuplicateAddress, "Address %s appears more than once under address location %s.", a, loc)
			}
			seenAddr[a] = true
			svcs, ae := serviceNames(wc, st, ao, ap, gwID)
			if ae != nil {
				return nil, ae
			}
			u.addrs = append(u.addrs, addrUpdate{addr: a, services: svcs})
		}
		updates = append(updates, u)
	}
	// The result must not hold an address under two locations.
	after := map[netip.Addr]netip.Addr{}
	gone := map[netip.Addr]bool{}
	for _, u := range updates {
		if !u.full && len(u.addrs) == 0 {
			gone[u.loc] = true
			continue
		}
		for _, a := range u.addrs {
			if len(a.services) > 0 {
				if prev, dup := after[a.addr]; dup && prev != u.loc {
					return nil, sgwBadRequest(codeAddressInTwo, "Address %s would be under address locations %s and %s.", a.addr, prev, u.loc)
				}
				after[a.addr] = u.loc
			}
		}
	}
	for a, loc := range after {
		cur, ok := st.addrLoc[a]
		if !ok || cur == loc || gone[cur] {
			continue
		}
		if stillThere(updates, topFull, cur, a) {
			return nil, sgwBadRequest(codeAddressInTwo, "Address %s would be under address locations %s and %s.", a, cur, loc)
		}
	}
	return func() { st.applyLocations(topFull, updates) }, nil
}

// stillThere reports whether address a, now under location loc, stays
// there after the updates (which do not remove loc with an empty Partial).
func stillThere(updates []locUpdate, topFull bool, loc, a netip.Addr) bool {
	for _, u := range updates {
		if u.loc != loc {
			continue
		}
		for _, x := range u.addrs {
			if x.addr == a {
				return len(x.services) > 0
			}
		}
		return !u.full
	}
	return !topFull
}

// serviceNames reads an address's required services array: names of
// registered services, each once; at most one Outbound (or
// InboundOutbound) service that is not the default, and only one whose NAT
// gateway is attached to this gateway.
func serviceNames(wc *writeCtx, st *sgwState, ao obj, path, gwID string) ([]string, *armError) {
	arr, has, err := getArr(ao, "services", path)
	if err != nil {
		return nil, errBadShape(err)
	}
	if !has {
		return nil, errBadShape(&fieldError{joinPath(path, "services"), "is required (an empty array unbinds the address)"})
	}
	out := make([]string, 0, len(arr))
	seen := map[string]bool{}
	outbound := ""
	for i, v := range arr {
		s, ok := v.(string)
		if !ok {
			return nil, errBadShape(&fieldError{indexPath(joinPath(path, "services"), i), "expected a string, got " + jsonKind(v)})
		}
		svc := st.services[strings.ToLower(s)]
		if svc == nil {
			return nil, sgwBadRequest(codeUnknownService, "Service '%s' named by %s is not a service of service gateway %s.", s, path, gwID)
		}
		if seen[strings.ToLower(s)] {
			return nil, sgwBadRequest(codeDuplicateService, "Service '%s' appears more than once in %s.services.", s, path)
		}
		seen[strings.ToLower(s)] = true
		if svc.natGW != "" && !svc.isDefault {
			if outbound != "" {
				return nil, sgwBadRequest(codeMultipleOutbound, "%s names the outbound services '%s' and '%s'; an address egresses through one.", path, outbound, svc.name)
			}
			outbound = svc.name
			if !natAttachedTo(wc, svc.natGW, gwID) {
				return nil, sgwBadRequest(codeNatGatewayNotAttached, "Service '%s' named by %s uses NAT gateway %s, which is not attached to service gateway %s.", svc.name, path, svc.natGW, gwID)
			}
		}
		out = append(out, svc.name)
	}
	sort.Strings(out)
	return out, nil
}

// natAttachedTo reports whether the NAT gateway exists and is attached to
// the service gateway gwID.
func natAttachedTo(wc *writeCtx, natID, gwID string) bool {
	_, v := wc.lookupKind(natID, "natGateways")
	if v == nil {
		return false
	}
	r, ok := propsOf(v.doc)["serviceGateway"].(obj)
	return ok && strings.EqualFold(stringOf(r["id"]), gwID)
}

// mappedNatUser returns the name of a service using the NAT gateway natID
// that an address still maps ("" when none).
func (st *sgwState) mappedNatUser(natID string) string {
	for k, s := range st.services {
		if strings.EqualFold(s.natGW, natID) && st.namedByAddress(k) {
			return s.name
		}
	}
	return ""
}

// natUsers finds a gateway service whose publicNatGatewayId is natID.
func (wc *writeCtx) natUsers(natID string) (gwID, service string, ok bool) {
	wc.e.forEachGateway(wc.now, func(id string, st *sgwState) bool {
		for _, svc := range st.services {
			if strings.EqualFold(svc.natGW, natID) {
				gwID, service, ok = id, svc.name, true
				return false
			}
		}
		return true
	})
	return gwID, service, ok
}

// forEachGateway calls fn with the id and state of every service gateway
// live at now, until fn returns false (state lock held).
func (e *Emulator) forEachGateway(now time.Time, fn func(id string, st *sgwState) bool) {
	for _, s := range e.subs {
		for _, g := range s.groups {
			if g.goneAt(now) {
				continue
			}
			for key, en := range g.resources {
				if !strings.HasPrefix(key, "servicegateways/") || en.cur == nil || en.cur.phaseAt(now) == phaseGone {
					continue
				}
				st, _ := en.ext.(*sgwState)
				if st == nil {
					continue
				}
				if !fn(stringOf(en.cur.doc["id"]), st) {
					return
				}
			}
		}
	}
}

// applyLocations applies validated updates.
func (st *sgwState) applyLocations(topFull bool, updates []locUpdate) {
	if topFull {
		listed := map[netip.Addr]bool{}
		for _, u := range updates {
			listed[u.loc] = true
		}
		for loc := range st.locs {
			if !listed[loc] {
				st.dropLocation(loc)
			}
		}
	}
	for _, u := range updates {
		switch {
		case u.full:
			st.dropLocation(u.loc)
			l := &sgwLocation{addrs: map[netip.Addr][]string{}}
			st.locs[u.loc] = l
			for _, a := range u.addrs {
				if len(a.services) > 0 {
					st.setAddr(u.loc, l, a.addr, a.services)
				}
			}
		case len(u.addrs) == 0:
			st.dropLocation(u.loc)
		default:
			l := st.locs[u.loc]
			if l == nil {
				l = &sgwLocation{addrs: map[netip.Addr][]string{}}
				st.locs[u.loc] = l
			}
			for _, a := range u.addrs {
				if len(a.services) == 0 {
					if _, ok := l.addrs[a.addr]; ok {
						delete(l.addrs, a.addr)
						delete(st.addrLoc, a.addr)
					}
					continue
				}
				st.setAddr(u.loc, l, a.addr, a.services)
			}
		}
	}
}

func (st *sgwState) setAddr(loc netip.Addr, l *sgwLocation, a netip.Addr, services []string) {
	if prev, ok := st.addrLoc[a]; ok && prev != loc {
		if pl := st.locs[prev]; pl != nil {
			delete(pl.addrs, a)
		}
	}
	l.addrs[a] = services
	st.addrLoc[a] = loc
}

func (st *sgwState) dropLocation(loc netip.Addr) {
	l := st.locs[loc]
	if l == nil {
		return
	}
	for a := range l.addrs {
		if st.addrLoc[a] == loc {
			delete(st.addrLoc, a)
		}
	}
	delete(st.locs, loc)
}

// namedByAddress reports whether any address lists the service (lower-cased
// name).
func (st *sgwState) namedByAddress(lname string) bool {
	for _, l := range st.locs {
		for _, svcs := range l.addrs {
			for _, s := range svcs {
				if strings.ToLower(s) == lname {
					return true
				}
			}
		}
	}
	return false
}

// applyUpdateServices validates an updateServices request against st and
// returns the function that applies it.
func applyUpdateServices(wc *writeCtx, st *sgwState, gw obj, in obj) (func(), *armError) {
	full, ae := updateAction(in, "action", "")
	if ae != nil {
		return nil, ae
	}
	arr, _, err := getArr(in, "serviceRequests", "")
	if err != nil {
		return nil, errBadShape(err)
	}
	gwID := stringOf(gw["id"])
	upserts := map[string]*sgwService{}
	deletes := map[string]bool{}
	var order []string
	for i, el := range arr {
		p := indexPath("serviceRequests", i)
		ro, ok := el.(map[string]any)
		if !ok {
			return nil, errBadShape(&fieldError{p, "expected an object, got " + jsonKind(el)})
		}
		isDelete, _, err := getBool(ro, "isDelete", p)
		if err != nil {
			return nil, errBadShape(err)
		}
		so, err := getObj(ro, "service", p)
		if err != nil {
			return nil, errBadShape(err)
		}
		if so == nil {
			return nil, errBadShape(&fieldError{joinPath(p, "service"), "is required"})
		}
		sp := joinPath(p, "service")
		name, _, err := getStr(so, "name", sp)
		if err != nil {
			return nil, errBadShape(err)
		}
		if !validServiceName(name) {
			return nil, sgwBadRequest(codeInvalidServiceConfig, "%s.name '%s' is not a valid service name (1 to 80 letters, digits, '-', '_' or '.').", sp, name)
		}
		key := strings.ToLower(name)
		if upserts[key] != nil || deletes[key] {
			return nil, sgwBadRequest(codeDuplicateService, "Service '%s' appears more than once in the request to service gateway %s.", name, gwID)
		}
		if isDelete {
			deletes[key] = true
			continue
		}
		svc, ae := parseService(wc, so, name, sp, gw)
		if ae != nil {
			return nil, ae
		}
		upserts[key] = svc
		order = append(order, key)
	}
	// The services after the request.
	after := map[string]*sgwService{}
	if !full {
		for k, s := range st.services {
			after[k] = s
		}
	}
	for k := range deletes {
		delete(after, k)
	}
	for _, k := range order {
		after[k] = upserts[k]
	}
	for k, s := range st.services {
		if _, kept := after[k]; !kept && st.namedByAddress(k) {
			return nil, sgwBadRequest(codeOverlayMappings,
				"Service '%s' of service gateway %s cannot be deleted: addresses are still mapped to it. Remove it from every address first.", s.name, gwID)
		}
	}
	for k, s := range st.services {
		if n, kept := after[k]; s.natGW != "" && (!kept || !strings.EqualFold(n.natGW, s.natGW)) && natAttachedTo(wc, s.natGW, gwID) {
			return nil, sgwBadRequest(codeNatGatewayAttached,
				"Service '%s' of service gateway %s cannot be removed or moved off NAT gateway %s while that NAT gateway is attached to the service gateway; detach it first (serviceGateway: null).", s.name, gwID, s.natGW)
		}
	}
	defaults := 0
	poolUser := map[string]string{}
	for _, s := range after {
		if s.isDefault {
			defaults++
		}
		for _, pl := range s.pools {
			if other, used := poolUser[strings.ToLower(pl.id)]; used {
				return nil, sgwBadRequest(codePoolInUse, "Backend address pool %s is used by services '%s' and '%s'.", pl.id, other, s.name)
			}
			poolUser[strings.ToLower(pl.id)] = s.name
		}
	}
	if defaults > 1 {
		return nil, sgwBadRequest(codeMultipleDefaults, "Service gateway %s cannot have more than one default service.", gwID)
	}
	return func() { st.services = after }, nil
}

func validServiceName(n string) bool {
	if n == "" || len(n) > 80 {
		return false
	}
	for i := 0; i < len(n); i++ {
		if c := n[i]; !alnum(c) && c != '-' && c != '_' && c != '.' {
			return false
		}
	}
	return true
}

// parseService validates one service of an updateServices request.
func parseService(wc *writeCtx, so obj, name, path string, gw obj) (*sgwService, *armError) {
	props, err := getObj(so, "properties", path)
	if err != nil {
		return nil, errBadShape(err)
	}
	if props == nil {
		return nil, errBadShape(&fieldError{joinPath(path, "properties"), "is required"})
	}
	pp := joinPath(path, "properties")
	typ, ae := enumProp(shallowCopy(props), "serviceType", pp, "", "Inbound", "Outbound", "InboundOutbound")
	if ae != nil {
		return nil, ae
	}
	if typ == "" {
		return nil, errBadShape(&fieldError{joinPath(pp, "serviceType"), "is required (Inbound, Outbound or InboundOutbound)"})
	}
	isDefault, _, err := getBool(props, "isDefault", pp)
	if err != nil {
		return nil, errBadShape(err)
	}
	nat, _, err := getStr(props, "publicNatGatewayId", pp)
	if err != nil {
		return nil, errBadShape(err)
	}
	svc := &sgwService{name: name, typ: typ, isDefault: isDefault}
	pools, _, err := getArr(props, "loadBalancerBackendPools", pp)
	if err != nil {
		return nil, errBadShape(err)
	}
	gwVNet := ""
	if r, ok := propsOf(gw)["virtualNetwork"].(obj); ok {
		gwVNet = stringOf(r["id"])
	}
	for i, el := range pools {
		p := indexPath(joinPath(pp, "loadBalancerBackendPools"), i)
		po, ok := el.(map[string]any)
		if !ok {
			return nil, errBadShape(&fieldError{p, "expected an object, got " + jsonKind(el)})
		}
		id, _, err := getStr(po, "id", p)
		if err != nil {
			return nil, errBadShape(err)
		}
		lbv, pool := wc.lookupChild(id, "loadBalancers", "backendAddressPools")
		if pool == nil {
			return nil, errInvalidReference(id, stringOf(gw["id"]))
		}
		if s, _ := lbv.doc["sku"].(obj); stringOf(s["name"]) != lbSKUService {
			return nil, sgwBadRequest(codePoolNotServiceSKU, "Backend address pool %s belongs to a load balancer of sku %s; service gateways take pools of sku %s load balancers only.", id, stringOf(s["name"]), lbSKUService)
		}
		canon := stringOf(pool["id"])
		if n, has, err := getStr(po, "name", p); err != nil {
			return nil, errBadShape(err)
		} else if has && n != "" && !strings.EqualFold(n, stringOf(pool["name"])) {
			return nil, sgwBadRequest(codeInvalidServiceConfig, "%s.name '%s' does not match the pool %s.", p, n, canon)
		}
		pl := sgwPool{id: canon, name: stringOf(pool["name"])}
		ppr, err := getObj(po, "properties", p)
		if err != nil {
			return nil, errBadShape(err)
		}
		if ppr != nil {
			if vid, has, err := getRef(ppr, "virtualNetwork", joinPath(p, "properties")); err != nil {
				return nil, errBadShape(err)
			} else if has {
				_, vv := wc.lookupKind(vid, "virtualNetworks")
				if vv == nil {
					return nil, errInvalidReference(vid, canon)
				}
				pl.vnet = stringOf(vv.doc["id"])
				if gwVNet != "" && !strings.EqualFold(pl.vnet, gwVNet) {
					return nil, sgwBadRequest(codeInvalidServiceConfig, "Backend address pool %s refers to virtual network %s, not the service gateway's %s.", canon, pl.vnet, gwVNet)
				}
			}
		}
		svc.pools = append(svc.pools, pl)
	}
	switch typ {
	case "Inbound":
		if nat != "" {
			return nil, sgwBadRequest(codeInvalidServiceConfig, "Inbound service '%s' cannot have a publicNatGatewayId.", name)
		}
	case "Outbound":
		if len(svc.pools) > 0 {
			return nil, sgwBadRequest(codeInvalidServiceConfig, "Outbound service '%s' cannot have loadBalancerBackendPools.", name)
		}
		if nat == "" {
			return nil, sgwBadRequest(codeInvalidServiceConfig, "Outbound service '%s' needs a publicNatGatewayId.", name)
		}
	}
	if nat != "" {
		_, v := wc.lookupKind(nat, "natGateways")
		if v == nil {
			return nil, errInvalidReference(nat, stringOf(gw["id"]))
		}
		svc.natGW = stringOf(v.doc["id"])
		if !natAttachedTo(wc, svc.natGW, stringOf(gw["id"])) {
			return nil, sgwBadRequest(codeNatGatewayNotAttached, "Service '%s' uses NAT gateway %s, which is not attached to service gateway %s (properties.serviceGateway).", name, svc.natGW, stringOf(gw["id"]))
		}
	}
	return svc, nil
}

// renderServices renders the services sorted by name, as GET /services
// lists them.
func (st *sgwState) renderServices() []any {
	keys := make([]string, 0, len(st.services))
	for k := range st.services {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]any, 0, len(keys))
	for _, k := range keys {
		out = append(out, st.services[k].render())
	}
	return out
}

func (s *sgwService) render() obj {
	pools := make([]any, 0, len(s.pools))
	for _, p := range s.pools {
		po := obj{"id": p.id, "name": p.name}
		if p.vnet != "" {
			po["properties"] = obj{"virtualNetwork": ref(p.vnet)}
		}
		pools = append(pools, po)
	}
	props := obj{"serviceType": s.typ, "isDefault": s.isDefault, "loadBalancerBackendPools": pools}
	if s.natGW != "" {
		props["publicNatGatewayId"] = s.natGW
	}
	return obj{"name": s.name, "properties": props}
}

// renderIP renders an address as NRP does: IPv6 upper-case.
func renderIP(a netip.Addr) string {
	if a.Is6() {
		return strings.ToUpper(a.String())
	}
	return a.String()
}

// sortedLocations lists the locations in address order.
func (st *sgwState) sortedLocations() []netip.Addr {
	out := make([]netip.Addr, 0, len(st.locs))
	for l := range st.locs {
		out = append(out, l)
	}
	slices.SortFunc(out, func(a, b netip.Addr) int { return a.Compare(b) })
	return out
}

func (st *sgwState) renderLocation(loc netip.Addr) obj {
	l := st.locs[loc]
	addrs := make([]netip.Addr, 0, len(l.addrs))
	for a := range l.addrs {
		addrs = append(addrs, a)
	}
	slices.SortFunc(addrs, func(a, b netip.Addr) int { return a.Compare(b) })
	out := make([]any, 0, len(addrs))
	for _, a := range addrs {
		svcs := make([]any, 0, len(l.addrs[a]))
		for _, s := range l.addrs[a] {
			svcs = append(svcs, s)
		}
		out = append(out, obj{"address": renderIP(a), "services": svcs})
	}
	return obj{"addressLocation": renderIP(loc), "addresses": out}
}

// poolUsers returns the gateways' services (gateway id and service name)
// that reference a pool of the load balancer lbID (pool == "") or the one
// pool poolID.
func (wc *writeCtx) poolUsers(lbID, poolID string) (gwID, service string, ok bool) {
	prefix := strings.ToLower(lbID) + "/backendaddresspools/"
	wc.e.forEachGateway(wc.now, func(id string, st *sgwState) bool {
		for _, svc := range st.services {
			for _, p := range svc.pools {
				pid := strings.ToLower(p.id)
				if (poolID == "" && strings.HasPrefix(pid, prefix)) || (poolID != "" && pid == strings.ToLower(poolID)) {
					gwID, service, ok = id, svc.name, true
					return false
				}
			}
		}
		return true
	})
	return gwID, service, ok
}

func errLBInUseByGateway(what, gwID, service string) *armError {
	return sgwBadRequest(codeLBInUseByGateway, "%s is used by service '%s' of service gateway %s; remove it from the service first.", what, service, gwID)
}
