package emulator

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/azlb/azlb/internal/emulator/dataplane"
)

// dataPlane connects the emulator's state to a dataplane.Plane: after every
// change the whole configuration is rebuilt from the current load
// balancers and applied (the plane works out the difference).
type dataPlane struct {
	plane *dataplane.Plane

	mu     sync.Mutex // serializes build + apply, so a newer state is never overwritten by an older one
	closed bool
	timer  clock.Timer // wakes up when an operation in flight completes
}

// newDataPlane starts the plane of an emulator with Options.DataPlane.
func newDataPlane(o Options) *dataPlane {
	ck, ok := o.Clock.(clock.WithTicker)
	if !ok {
		ck = clock.RealClock{}
	}
	return &dataPlane{plane: dataplane.New(dataplane.Options{Clock: ck, Logger: o.DataPlaneLogger, Network: o.DataPlaneNetwork})}
}

// syncDataPlane applies the current state to the data plane (no-op when it
// is off). Deletes that complete later (an operation in flight) are applied
// when they complete.
func (e *Emulator) syncDataPlane() {
	dp := e.dp
	if dp == nil {
		return
	}
	dp.mu.Lock()
	defer dp.mu.Unlock()
	if dp.closed {
		return
	}
	cfg, next := e.dataPlaneConfig()
	dp.plane.Apply(cfg)
	dp.plane.SetEgress(e.egressRoutes())
	if dp.timer != nil {
		dp.timer.Stop()
		dp.timer = nil
	}
	if de, ok := e.clock.(clock.WithDelayedExecution); ok && !next.IsZero() {
		dp.timer = de.AfterFunc(max(next.Sub(e.clock.Now()), 0), e.syncDataPlane)
	}
}

func (dp *dataPlane) close() error {
	dp.mu.Lock()
	dp.closed = true
	if dp.timer != nil {
		dp.timer.Stop()
	}
	dp.mu.Unlock()
	return dp.plane.Close()
}

// DataPlaneStatus reports what the data plane serves, with its counters;
// false when the emulator runs without one.
func (e *Emulator) DataPlaneStatus() (dataplane.Status, bool) {
	if e.dp == nil {
		return dataplane.Status{}, false
	}
	return e.dp.plane.Status(), true
}

// dataPlaneConfig builds the data plane's configuration from every live
// load balancer, with the network security groups that guard each member,
// and the time of the next completion of an operation that changes it
// (zero: none in flight).
func (e *Emulator) dataPlaneConfig() (dataplane.Config, time.Time) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	now := e.clock.Now()
	var cfg dataplane.Config
	var next time.Time
	soonest := func(op *operation) {
		if op != nil && !op.done(now) && (next.IsZero() || op.end.Before(next)) {
			next = op.end
		}
	}
	ix := e.securityIndex(now)
	pods := e.gatewayMembers(now, ix)
	for _, s := range e.subs {
		for _, g := range s.groups {
			if g.goneAt(now) {
				continue
			}
			soonest(g.deleteOp)
			for _, en := range g.resources {
				if en.cur == nil || en.cur.phaseAt(now) == phaseGone {
					continue
				}
				if en.cur.deleting {
					soonest(en.cur.op) // a load balancer, NSG, vnet or NIC going away
				}
				if strings.EqualFold(en.kind.typ, "loadBalancers") {
					cfg.Rules = append(cfg.Rules, e.lbRules(en.cur.doc, now, ix, pods)...)
				}
			}
		}
	}
	cfg.Rules = append(cfg.Rules, dataplane.PrivateEndpointRules(cfg.Rules, e.privateLinks(now))...)
	return cfg, next
}

// lbRules translates one load balancer document (state lock held); pods
// are the members service gateways register, by pool (gatewayMembers).
func (e *Emulator) lbRules(doc obj, now time.Time, ix *secIndex, pods map[string][]dataplane.Member) []dataplane.Rule {
	props := propsOf(doc)
	sku := ""
	if s, ok := doc["sku"].(obj); ok {
		sku = stringOf(s["name"])
	}
	// Basic load balancers are open by default; Standard ones are closed
	// unless a network security group lets traffic in.
	open := sku == "" || strings.EqualFold(sku, "Basic")
	frontends := map[string]frontendAddr{}
	for _, c := range children(props, "frontendIPConfigurations") {
		frontends[strings.ToLower(stringOf(c["id"]))] = e.frontendOf(propsOf(c), now)
	}
	type pool struct {
		members []dataplane.Member
		drain   time.Duration
	}
	pools := map[string]pool{}
	for _, c := range children(props, "backendAddressPools") {
		id := stringOf(c["id"])
		cp := propsOf(c)
		p := pool{drain: time.Duration(intOf(cp["drainPeriodInSeconds"])) * time.Second}
		for _, a := range arrayOf(cp["loadBalancerBackendAddresses"]) {
			ap := propsOf(a)
			ip, err := netip.ParseAddr(stringOf(ap["ipAddress"]))
			if err != nil {
				continue // NIC-based entries have no address here
			}
			vnet, subnet := refID(ap["virtualNetwork"]), refID(ap["subnet"])
			if vnet == "" && subnet != "" {
				vnet, _, _ = strings.Cut(subnet, "/subnets/")
			}
			if vnet == "" {
				vnet = refID(cp["virtualNetwork"])
			}
			p.members = append(p.members, dataplane.Member{Pool: id, Name: stringOf(a["name"]), Addr: ip,
				AdminState: dataplane.AdminState(stringOf(ap["adminState"])),
				Security:   ix.memberSecurity(vnet, subnet, ip, open)})
		}
		if gw, ok := pods[strings.ToLower(id)]; ok {
			// Whether Azure applies drainPeriodInSeconds to a pool the
			// service gateway fills is not documented: strictest reading,
			// a pod address that leaves has its flows reset at once.
			p.members, p.drain = append(p.members, gw...), 0
		}
		pools[strings.ToLower(id)] = p
	}
	probes := map[string]*dataplane.Probe{}
	for _, c := range children(props, "probes") {
		cp := propsOf(c)
		pr := &dataplane.Probe{ID: stringOf(c["id"]), Protocol: stringOf(cp["protocol"]), Port: portOf(cp["port"]),
			Path:        stringOf(cp["requestPath"]),
			Interval:    time.Duration(intOf(cp["intervalInSeconds"])) * time.Second,
			Threshold:   int(intOf(cp["probeThreshold"])),
			AllProbedUp: strings.EqualFold(stringOf(cp["noHealthyBackendsBehavior"]), "AllProbedUp")}
		probes[strings.ToLower(pr.ID)] = pr
	}
	var out []dataplane.Rule
	for _, c := range children(props, "loadBalancingRules") {
		cp := propsOf(c)
		r := dataplane.Rule{ID: stringOf(c["id"]), Protocol: dataplane.Protocol(stringOf(cp["protocol"])),
			BackendPort:  portOf(cp["backendPort"]),
			IdleTimeout:  time.Duration(intOf(cp["idleTimeoutInMinutes"])) * time.Minute,
			TCPReset:     cp["enableTcpReset"] == true,
			FloatingIP:   cp["enableFloatingIP"] == true,
			Distribution: dataplane.Distribution(stringOf(cp["loadDistribution"]))}
		fe := frontends[strings.ToLower(refID(cp["frontendIPConfiguration"]))]
		r.Frontend, r.Unserved = netip.AddrPortFrom(fe.addr, portOf(cp["frontendPort"])), fe.reason
		switch {
		case r.FloatingIP && fe.privateV6:
			// ARM accepts it, the data path drops it. Strictest reading:
			// whatever the members, the SKU or the protocol.
			r.Unserved = dataplane.UnservedInternalIPv6FloatingIP
		case sku == "Gateway":
			r.Unserved = "gateway load balancers are not served"
		}
		poolIDs := []string{refID(cp["backendAddressPool"])}
		if list := arrayOf(cp["backendAddressPools"]); len(list) > 0 {
			poolIDs = poolIDs[:0]
			for _, p := range list {
				poolIDs = append(poolIDs, stringOf(p["id"]))
			}
		}
		for _, id := range poolIDs {
			p := pools[strings.ToLower(id)]
			r.Members = append(r.Members, p.members...)
			r.DrainPeriod = max(r.DrainPeriod, p.drain)
		}
		if id := refID(cp["probe"]); id != "" {
			r.Probe = probes[strings.ToLower(id)]
		}
		out = append(out, r)
	}
	return out
}

// frontendAddr is the address a frontend serves on, or why it has none.
type frontendAddr struct {
	addr   netip.Addr
	reason string
	// privateV6: the frontend is a private (internal load balancer) IPv6
	// one, by its address or its privateIPAddressVersion.
	privateV6 bool
}

// frontendOf finds a frontend's address: its public IP's, or its private
// one (state lock held).
func (e *Emulator) frontendOf(fp obj, now time.Time) (f frontendAddr) {
	switch {
	case refID(fp["publicIPAddress"]) != "":
		id := refID(fp["publicIPAddress"])
		pip := e.liveDoc(id, now)
		if pip == nil {
			f.reason = "public IP " + id + " does not exist"
			return f
		}
		s := stringOf(propsOf(pip)["ipAddress"])
		if a, err := netip.ParseAddr(s); err == nil {
			f.addr = a
			return f
		}
		f.reason = "public IP " + id + " has no address"
	case refID(fp["publicIPPrefix"]) != "":
		f.reason = "frontends on a public IP prefix are not served"
	default:
		s := stringOf(fp["privateIPAddress"])
		f.privateV6 = strings.EqualFold(stringOf(fp["privateIPAddressVersion"]), "IPv6")
		if a, err := netip.ParseAddr(s); err == nil {
			f.addr = a
			f.privateV6 = f.privateV6 || (a.Is6() && !a.Is4In6())
			return f
		}
		f.reason = fmt.Sprintf("the frontend has no private IP address (%q)", s)
	}
	return f
}

// liveDoc returns the document of a live top-level Microsoft.Network
// resource (state lock held).
func (e *Emulator) liveDoc(id string, now time.Time) obj {
	a, ok := parseResourceID(id)
	if !ok || a.childType != "" {
		return nil
	}
	s := e.subs[strings.ToLower(a.sub)]
	if s == nil {
		return nil
	}
	g := s.liveGroup(a.rg, now)
	if g == nil {
		return nil
	}
	_, v := g.liveEntry(a.typ, a.name, now)
	if v == nil {
		return nil
	}
	return v.doc
}

// children returns the objects of a child collection.
func children(props obj, key string) []obj { return arrayOf(props[key]) }

func arrayOf(v any) []obj {
	arr, _ := v.([]any)
	out := make([]obj, 0, len(arr))
	for _, x := range arr {
		if o, ok := x.(map[string]any); ok {
			out = append(out, o)
		}
	}
	return out
}

func refID(v any) string {
	if o, ok := v.(map[string]any); ok {
		return stringOf(o["id"])
	}
	return ""
}

// intOf reads a stored integer whatever its Go type (decoded json.Number,
// or a default the emulator set).
func intOf(v any) int64 {
	switch n := v.(type) {
	case int:
		return int64(n)
	case int64:
		return n
	case float64:
		return int64(n)
	case json.Number:
		i, _ := n.Int64()
		return i
	case string:
		i, _ := strconv.ParseInt(n, 10, 64)
		return i
	}
	return 0
}

func portOf(v any) uint16 {
	n := intOf(v)
	if n < 0 || n > 65535 {
		return 0
	}
	return uint16(n)
}
