package servicegateway

import (
	"net/netip"
	"slices"
	"sort"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
)

// addrKey is one pod address under one location (a node address of the
// same family). Both are canonical (netip) so IPv6 in any spelling is one
// key.
type addrKey struct {
	loc, addr netip.Addr
}

// diffTracker mirrors two things: what the cluster wants the service gateway to
// hold (per Service, the addresses of its ready endpoints) and what the
// gateway holds (its inbound services and its address locations, as last
// read or written). Diff computes the one updateAddressLocations request
// that brings the gateway to the cluster's view; Applied folds a successful
// request into the mirror. It is not safe for concurrent use: the engine
// guards it with its lock and never holds that lock during an ARM call.
//
// Only keys marked dirty are compared, so a Diff costs what changed, not
// what exists. A key becomes dirty when a Service's wanted addresses
// change, when a Service becomes ready or stops being ready, when a request
// that carried it failed, or on Resync.
type diffTracker struct {
	// desired: uid -> addresses its ready endpoints want.
	desired map[string]map[addrKey]struct{}
	// wantedBy: address -> uids that want it (the reverse of desired).
	wantedBy map[addrKey]map[string]struct{}
	// ready: uids whose addresses may be sent (registered, not deleting).
	ready map[string]bool

	// nrp mirrors the gateway's address locations: location -> address ->
	// sorted service names as NRP holds them (names lower-cased for ours,
	// as given for others).
	nrp map[netip.Addr]map[netip.Addr][]string
	// nrpBy: our service name -> addresses NRP maps to it.
	nrpBy map[string]map[addrKey]struct{}
	// registered: inbound services NRP holds, by name (lower-cased uid),
	// with the pool ids they point at.
	registered map[string][]string
	// outbound: the egress identities azlb owns (besides UIDs, the only
	// services it adds to or removes from an address).
	outbound map[string]struct{}

	dirty    map[addrKey]struct{}
	inflight map[addrKey]struct{}
	// held: addresses wanted under two locations at once, per address;
	// they become dirty again when a key of the same address changes.
	held map[netip.Addr]map[addrKey]struct{}
}

// newDiffTracker returns an empty tracker.
func newDiffTracker() *diffTracker {
	return &diffTracker{
		desired:    map[string]map[addrKey]struct{}{},
		wantedBy:   map[addrKey]map[string]struct{}{},
		ready:      map[string]bool{},
		nrp:        map[netip.Addr]map[netip.Addr][]string{},
		nrpBy:      map[string]map[addrKey]struct{}{},
		registered: map[string][]string{},
		outbound:   map[string]struct{}{},
		dirty:      map[addrKey]struct{}{},
		inflight:   map[addrKey]struct{}{},
		held:       map[netip.Addr]map[addrKey]struct{}{},
	}
}

// mark makes a key dirty, with the keys held back for the same address.
func (t *diffTracker) mark(k addrKey) {
	t.dirty[k] = struct{}{}
	t.release(k.addr)
}

// release makes the keys held back for an address dirty again.
func (t *diffTracker) release(addr netip.Addr) {
	for x := range t.held[addr] {
		t.dirty[x] = struct{}{}
	}
	delete(t.held, addr)
}

// SetDesired replaces the addresses a Service wants and marks the changed
// ones dirty. It reports whether anything changed.
func (t *diffTracker) SetDesired(uid string, want map[addrKey]struct{}) bool {
	cur := t.desired[uid]
	changed := false
	for k := range cur {
		if _, keep := want[k]; !keep {
			delete(t.wantedBy[k], uid)
			if len(t.wantedBy[k]) == 0 {
				delete(t.wantedBy, k)
			}
			t.markIfReady(uid, k)
			changed = true
		}
	}
	for k := range want {
		if _, had := cur[k]; !had {
			if t.wantedBy[k] == nil {
				t.wantedBy[k] = map[string]struct{}{}
			}
			t.wantedBy[k][uid] = struct{}{}
			t.markIfReady(uid, k)
			changed = true
		}
	}
	if len(want) == 0 {
		delete(t.desired, uid)
	} else {
		t.desired[uid] = want
	}
	return changed
}

func (t *diffTracker) markIfReady(uid string, k addrKey) {
	if t.ready[uid] {
		t.mark(k)
	}
}

// Wanted returns the addresses a Service wants (shared: do not modify).
func (t *diffTracker) Wanted(uid string) map[addrKey]struct{} { return t.desired[uid] }

// SetReady says whether a Service's addresses may be sent: it must be
// registered in the gateway (the gateway refuses addresses naming unknown
// services) and not being deleted. It marks the Service's wanted addresses
// and those NRP maps to it dirty when that changes.
func (t *diffTracker) SetReady(uid string, ready bool) bool {
	if t.ready[uid] == ready {
		return false
	}
	if ready {
		t.ready[uid] = true
	} else {
		delete(t.ready, uid)
	}
	for k := range t.desired[uid] {
		t.mark(k)
	}
	for k := range t.nrpBy[uid] {
		t.mark(k)
	}
	return true
}

// Ready reports whether a Service's addresses may be sent.
func (t *diffTracker) Ready(uid string) bool { return t.ready[uid] }

// SetRegistered records that NRP holds the inbound service uid pointing at
// pools (nil pools: it does not hold it).
func (t *diffTracker) SetRegistered(uid string, pools []string) {
	if pools == nil {
		delete(t.registered, uid)
		return
	}
	t.registered[uid] = pools
}

// Registered returns the pools NRP's inbound service uid points at, and
// whether NRP holds it.
func (t *diffTracker) Registered(uid string) ([]string, bool) {
	p, ok := t.registered[uid]
	return p, ok
}

// RegisteredServices lists the inbound services NRP holds.
func (t *diffTracker) RegisteredServices() []string {
	out := make([]string, 0, len(t.registered))
	for n := range t.registered {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Mapped reports whether NRP maps any address to the service uid.
func (t *diffTracker) Mapped(uid string) bool { return len(t.nrpBy[uid]) > 0 }

// LoadNRP replaces the mirror of the gateway's address locations with what
// GetAddressLocations returned, canonicalising (NRP answers IPv6 upper-case;
// a location or address it lists twice is merged) and skipping what does
// not parse. Everything becomes dirty, so the next Diff removes what the
// cluster no longer wants.
func (t *diffTracker) LoadNRP(locs []*armnetwork.ServiceGatewayAddressLocationResponse) (skipped int) {
	t.nrp = map[netip.Addr]map[netip.Addr][]string{}
	t.nrpBy = map[string]map[addrKey]struct{}{}
	for _, l := range locs {
		if l == nil || l.AddressLocation == nil {
			skipped++
			continue
		}
		loc, ok := canonicalIP(*l.AddressLocation)
		if !ok {
			skipped++
			continue
		}
		for _, a := range l.Addresses {
			if a == nil || a.Address == nil {
				skipped++
				continue
			}
			ip, ok := canonicalIP(*a.Address)
			if !ok || ip.Is4() != loc.Is4() {
				skipped++
				continue
			}
			var svcs []string
			for _, s := range a.Services {
				if s != nil && *s != "" {
					svcs = append(svcs, serviceName(*s))
				}
			}
			k := addrKey{loc, ip}
			if old := t.nrpAt(k); old != nil {
				svcs = append(svcs, old...)
			}
			t.setNRP(k, svcs)
		}
		if t.nrp[loc] == nil {
			t.nrp[loc] = map[netip.Addr][]string{}
		}
	}
	t.markAll()
	return skipped
}

// serviceName lower-cases what looks like a Kubernetes UID (our services)
// and keeps any other name as NRP gave it.
func serviceName(s string) string {
	if isUID(s) {
		return strings.ToLower(s)
	}
	return s
}

func (t *diffTracker) nrpAt(k addrKey) []string {
	if l := t.nrp[k.loc]; l != nil {
		return l[k.addr]
	}
	return nil
}

// setNRP sets the services NRP maps an address to (empty: removes it).
func (t *diffTracker) setNRP(k addrKey, svcs []string) {
	for _, s := range t.nrpAt(k) {
		if m := t.nrpBy[s]; m != nil {
			delete(m, k)
			if len(m) == 0 {
				delete(t.nrpBy, s)
			}
		}
	}
	svcs = sortedUnique(svcs)
	if len(svcs) == 0 {
		if l := t.nrp[k.loc]; l != nil {
			delete(l, k.addr)
		}
		return
	}
	if t.nrp[k.loc] == nil {
		t.nrp[k.loc] = map[netip.Addr][]string{}
	}
	t.nrp[k.loc][k.addr] = svcs
	for _, s := range svcs {
		if t.nrpBy[s] == nil {
			t.nrpBy[s] = map[addrKey]struct{}{}
		}
		t.nrpBy[s][k] = struct{}{}
	}
}

func sortedUnique(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	out := slices.Clone(s)
	sort.Strings(out)
	return slices.Compact(out)
}

// markAll makes every known key dirty (after a restart or a Resync).
func (t *diffTracker) markAll() {
	for k := range t.wantedBy {
		t.mark(k)
	}
	for loc, addrs := range t.nrp {
		for a := range addrs {
			t.mark(addrKey{loc, a})
		}
	}
}

// Resync marks every key dirty, so the next Diff compares everything.
func (t *diffTracker) Resync() { t.markAll() }

// NRPTotals are the locations and addresses NRP holds.
func (t *diffTracker) NRPTotals() (locations, addresses int) {
	for _, l := range t.nrp {
		locations++
		addresses += len(l)
	}
	return locations, addresses
}

// Pending reports whether a Diff may have work (dirty keys).
func (t *diffTracker) Pending() bool { return len(t.dirty) > 0 }

// wantServices is what NRP should map an address to: the ready Services
// that want it, plus every service NRP maps it to that azlb does not own
// (outbound and foreign services are never dropped).
func (t *diffTracker) wantServices(k addrKey) []string {
	var out []string
	for uid := range t.wantedBy[k] {
		if t.ready[uid] {
			out = append(out, uid)
		}
	}
	for _, s := range t.nrpAt(k) {
		if !t.owns(s) {
			out = append(out, s)
		}
	}
	return sortedUnique(out)
}

// owns reports whether a service name is one of azlb's inbound services: a
// Kubernetes UID. Everything else (default-natgw, egress identities) is
// left as NRP holds it.
func (t *diffTracker) owns(name string) bool {
	if isUID(name) {
		return true
	}
	_, ok := t.outbound[name]
	return ok
}

// HeldByOtherOutbound lists the addresses of want that another egress
// identity azlb owns still wants: an address names at most one outbound
// service (Azure refuses more), so a pod moving between identities joins
// the new one only once the old one has let it go.
func (t *diffTracker) HeldByOtherOutbound(id string, want map[addrKey]struct{}) []addrKey {
	var out []addrKey
	for k := range want {
		for other := range t.wantedBy[k] {
			if _, ok := t.outbound[other]; ok && other != id {
				out = append(out, k)
				break
			}
		}
	}
	return out
}

// SetOwned says whether azlb owns the egress identity name (so it adds it
// to and removes it from addresses); the addresses NRP maps to it are
// compared again.
func (t *diffTracker) SetOwned(name string, owned bool) {
	if _, had := t.outbound[name]; had == owned {
		return
	}
	if owned {
		t.outbound[name] = struct{}{}
	} else {
		delete(t.outbound, name)
	}
	for k := range t.nrpBy[name] {
		t.mark(k)
	}
}

// MarkMapped makes the addresses NRP maps to the service name dirty (a
// deletion waits on them: compare them again rather than trust an
// abandoned batch).
func (t *diffTracker) MarkMapped(name string) {
	for k := range t.nrpBy[name] {
		t.mark(k)
	}
}

// MapsAddress reports whether NRP maps the pod address ip (under any
// location) to the service name.
func (t *diffTracker) MapsAddress(name string, ip netip.Addr) bool {
	for k := range t.nrpBy[name] {
		if k.addr == ip {
			return true
		}
	}
	return false
}

// WantsAddress reports whether the service name wants the pod address ip.
func (t *diffTracker) WantsAddress(name string, ip netip.Addr) bool {
	for k := range t.desired[name] {
		if k.addr == ip {
			return true
		}
	}
	return false
}

// batch is one updateAddressLocations request and what it will make NRP
// hold.
type batch struct {
	Request armnetwork.ServiceGatewayUpdateAddressLocationsRequest
	// sent: per address, the services the request sets (empty: removed).
	sent map[addrKey][]string
	// fullLocs are sent with FullUpdate (new to NRP); gone are removed whole.
	fullLocs map[netip.Addr]bool
	goneLocs map[netip.Addr]bool
	// Addresses counts the addresses in the request; Locations the locations.
	Addresses, Locations int
}

// Empty reports whether the batch has nothing to send.
func (b *batch) Empty() bool { return b == nil || b.Locations == 0 }

// Diff takes the dirty keys and builds the request that brings NRP to the
// cluster's view of them (nil when nothing differs). The keys it carries
// move in flight until Applied or Failed; keys that already match are
// clean. Shapes: top-level PartialUpdate; a location NRP does not hold is
// sent FullUpdate with its addresses, one it holds PartialUpdate with the
// changed addresses only; an address to remove has services [], a location
// that ends up empty is sent with addresses [] (deleting it). An address
// wanted under two locations at once (a pod IP reused on another node
// before the old endpoint is gone) is held back until only one remains.
func (t *diffTracker) Diff() *batch {
	if len(t.dirty) == 0 {
		return nil
	}
	b := &batch{sent: map[addrKey][]string{}, fullLocs: map[netip.Addr]bool{}, goneLocs: map[netip.Addr]bool{}}
	byLoc := map[netip.Addr][]addrKey{}
	// Where each address is (NRP) or will be (wanted).
	where := map[netip.Addr][]netip.Addr{}
	for k := range t.dirty {
		want := t.wantServices(k)
		have := t.nrpAt(k)
		delete(t.dirty, k)
		if slices.Equal(want, have) {
			continue
		}
		b.sent[k] = want
		byLoc[k.loc] = append(byLoc[k.loc], k)
		if len(want) > 0 {
			where[k.addr] = append(where[k.addr], k.loc)
		}
	}
	// Hold back an address that would end up under two locations.
	for addr, locs := range where {
		for loc, svcs := range t.nrpLocsOf(addr) {
			if _, sending := b.sent[addrKey{loc, addr}]; !sending && len(svcs) > 0 {
				locs = append(locs, loc)
			}
		}
		if len(sortedAddrs(locs)) < 2 {
			continue
		}
		for _, loc := range locs {
			k := addrKey{loc, addr}
			if len(b.sent[k]) > 0 {
				delete(b.sent, k)
				if t.held[addr] == nil {
					t.held[addr] = map[addrKey]struct{}{}
				}
				t.held[addr][k] = struct{}{} // retried when the address changes elsewhere
				byLoc[loc] = slices.DeleteFunc(byLoc[loc], func(x addrKey) bool { return x == k })
			}
		}
	}
	locs := make([]netip.Addr, 0, len(byLoc))
	for loc, keys := range byLoc {
		if len(keys) > 0 {
			locs = append(locs, loc)
		}
	}
	slices.SortFunc(locs, func(a, b netip.Addr) int { return a.Compare(b) })
	req := armnetwork.ServiceGatewayUpdateAddressLocationsRequest{
		Action:           to.Ptr(armnetwork.UpdateActionPartialUpdate),
		AddressLocations: make([]*armnetwork.ServiceGatewayAddressLocation, 0, len(locs)),
	}
	for _, loc := range locs {
		keys := byLoc[loc]
		slices.SortFunc(keys, func(a, b addrKey) int { return a.addr.Compare(b.addr) })
		_, known := t.nrp[loc]
		l := &armnetwork.ServiceGatewayAddressLocation{
			AddressLocation: to.Ptr(loc.String()),
			Addresses:       []*armnetwork.ServiceGatewayAddress{},
		}
		remaining := len(t.nrp[loc])
		for _, k := range keys {
			want := b.sent[k]
			_, had := t.nrp[loc][k.addr]
			switch {
			case had && len(want) == 0:
				remaining--
			case !had && len(want) > 0:
				remaining++
			}
		}
		switch {
		case !known:
			l.AddressUpdateAction = to.Ptr(armnetwork.AddressUpdateActionFullUpdate)
			b.fullLocs[loc] = true
			for _, k := range keys {
				if want := b.sent[k]; len(want) > 0 {
					l.Addresses = append(l.Addresses, address(k.addr, want))
				} else {
					delete(b.sent, k) // nothing to remove from a location NRP does not hold
				}
			}
			if len(l.Addresses) == 0 {
				continue
			}
		case remaining == 0:
			l.AddressUpdateAction = to.Ptr(armnetwork.AddressUpdateActionPartialUpdate)
			b.goneLocs[loc] = true
		default:
			l.AddressUpdateAction = to.Ptr(armnetwork.AddressUpdateActionPartialUpdate)
			for _, k := range keys {
				l.Addresses = append(l.Addresses, address(k.addr, b.sent[k]))
			}
		}
		b.Addresses += len(l.Addresses)
		req.AddressLocations = append(req.AddressLocations, l)
	}
	b.Request = req
	b.Locations = len(req.AddressLocations)
	for k := range b.sent {
		t.inflight[k] = struct{}{}
	}
	if b.Locations == 0 {
		return nil
	}
	return b
}

// nrpLocsOf finds the locations NRP holds an address under.
func (t *diffTracker) nrpLocsOf(addr netip.Addr) map[netip.Addr][]string {
	out := map[netip.Addr][]string{}
	for loc, addrs := range t.nrp {
		if svcs, ok := addrs[addr]; ok {
			out[loc] = svcs
		}
	}
	return out
}

func sortedAddrs(a []netip.Addr) []netip.Addr {
	out := slices.Clone(a)
	slices.SortFunc(out, func(x, y netip.Addr) int { return x.Compare(y) })
	return slices.Compact(out)
}

func address(a netip.Addr, services []string) *armnetwork.ServiceGatewayAddress {
	svcs := make([]*string, 0, len(services))
	for _, s := range services {
		svcs = append(svcs, to.Ptr(s))
	}
	return &armnetwork.ServiceGatewayAddress{Address: to.Ptr(a.String()), Services: svcs}
}

// Applied folds a batch NRP accepted into the mirror.
func (t *diffTracker) Applied(b *batch) {
	for loc := range b.goneLocs {
		for a := range t.nrp[loc] {
			t.setNRP(addrKey{loc, a}, nil)
		}
		delete(t.nrp, loc)
	}
	for loc := range b.fullLocs {
		if t.nrp[loc] == nil {
			t.nrp[loc] = map[netip.Addr][]string{}
		}
	}
	for k, svcs := range b.sent {
		if b.goneLocs[k.loc] {
			continue
		}
		t.setNRP(k, svcs)
	}
	for k := range b.sent {
		delete(t.inflight, k)
		t.release(k.addr) // the address changed: try what was held back

	}
}

// Failed returns a batch's keys to the dirty set.
func (t *diffTracker) Failed(b *batch) {
	for k := range b.sent {
		delete(t.inflight, k)
		t.mark(k)
	}
}

// Abandon drops a batch NRP refused for good: its keys are not retried
// until they change again (or the next Resync).
func (t *diffTracker) Abandon(b *batch) {
	for k := range b.sent {
		delete(t.inflight, k)
	}
}

// Split divides a batch's locations into two batches (to isolate what NRP
// refuses); ok is false for a batch of one location.
func (t *diffTracker) Split(b *batch) (first, second *batch, ok bool) {
	n := len(b.Request.AddressLocations)
	if n < 2 {
		return nil, nil, false
	}
	part := func(locs []*armnetwork.ServiceGatewayAddressLocation) *batch {
		nb := &batch{sent: map[addrKey][]string{}, fullLocs: map[netip.Addr]bool{}, goneLocs: map[netip.Addr]bool{},
			Request: armnetwork.ServiceGatewayUpdateAddressLocationsRequest{Action: b.Request.Action, AddressLocations: locs}}
		for _, l := range locs {
			loc, _ := canonicalIP(*l.AddressLocation)
			nb.fullLocs[loc] = b.fullLocs[loc]
			if !nb.fullLocs[loc] {
				delete(nb.fullLocs, loc)
			}
			if b.goneLocs[loc] {
				nb.goneLocs[loc] = true
			}
			nb.Addresses += len(l.Addresses)
			for k, v := range b.sent {
				if k.loc == loc {
					nb.sent[k] = v
				}
			}
		}
		nb.Locations = len(locs)
		return nb
	}
	return part(b.Request.AddressLocations[:n/2]), part(b.Request.AddressLocations[n/2:]), true
}
