package emulator

import (
	"context"
	"net"
	"net/netip"
	"strings"

	"github.com/azlb/azlb/internal/emulator/dataplane"
)

// egressRoutes builds the data plane's outbound routes from every service
// gateway: each address leaves through the NAT gateway of the outbound
// service it names that is not the default, else through the default one;
// only a NAT gateway attached to that gateway carries traffic, from its
// public IP of the address's family.
func (e *Emulator) egressRoutes() []dataplane.EgressRoute {
	e.mu.RLock()
	defer e.mu.RUnlock()
	now := e.clock.Now()
	live := func(en *entry) bool { return en != nil && en.cur != nil && en.cur.phaseAt(now) != phaseGone }
	docs := map[string]obj{} // lower(id) -> NAT gateway and public IP documents
	var gws []*entry
	for _, s := range e.subs {
		for _, g := range s.groups {
			for key, en := range g.resources {
				if !live(en) {
					continue
				}
				switch {
				case strings.HasPrefix(key, "servicegateways/"):
					gws = append(gws, en)
				case strings.HasPrefix(key, "natgateways/"), strings.HasPrefix(key, "publicipaddresses/"):
					docs[strings.ToLower(stringOf(en.cur.doc["id"]))] = en.cur.doc
				}
			}
		}
	}
	var out []dataplane.EgressRoute
	for _, gw := range gws {
		st, _ := gw.ext.(*sgwState)
		if st == nil {
			continue
		}
		gwID := stringOf(gw.cur.doc["id"])
		routes := map[string]*dataplane.EgressRoute{}
		route := func(svc *sgwService) *dataplane.EgressRoute {
			if r := routes[svc.name]; r != nil {
				return r
			}
			nat := docs[strings.ToLower(svc.natGW)]
			if nat == nil {
				return nil
			}
			if r, ok := propsOf(nat)["serviceGateway"].(obj); !ok || !strings.EqualFold(stringOf(r["id"]), gwID) {
				return nil
			}
			r := &dataplane.EgressRoute{Service: svc.name}
			for _, p := range asList(propsOf(nat)["publicIpAddresses"]) {
				pip := docs[strings.ToLower(stringOf(p.(obj)["id"]))]
				if a, err := netip.ParseAddr(stringOf(propsOf(pip)["ipAddress"])); pip != nil && err == nil {
					r.Sources = append(r.Sources, a)
				}
			}
			routes[svc.name] = r
			return r
		}
		var def *sgwService
		for _, s := range st.services {
			if s.isDefault && s.natGW != "" {
				def = s
			}
		}
		for _, l := range st.locs {
			for a, names := range l.addrs {
				var pick *sgwService
				for _, n := range names {
					if s := st.services[strings.ToLower(n)]; s != nil && s.natGW != "" && !s.isDefault {
						pick = s
					}
				}
				if pick == nil {
					pick = def
				}
				if pick == nil {
					continue
				}
				if r := route(pick); r != nil {
					r.Pods = append(r.Pods, a)
				}
			}
		}
		for _, r := range routes {
			out = append(out, *r)
		}
	}
	return out
}

// EgressSource returns the address a pod's outbound flows leave from (its
// NAT gateway's public IP) and the outbound service carrying them; false
// without a data plane or a route.
func (e *Emulator) EgressSource(pod netip.Addr) (netip.Addr, string, bool) {
	if e.dp == nil {
		return netip.Addr{}, "", false
	}
	return e.dp.plane.EgressSource(pod)
}

// DialEgress opens an outbound flow of a pod to a loopback address through
// the data plane (see dataplane.Plane.DialEgress).
func (e *Emulator) DialEgress(ctx context.Context, pod netip.Addr, network, address string) (net.Conn, error) {
	if e.dp == nil {
		return nil, dataplane.ErrNoEgress
	}
	return e.dp.plane.DialEgress(ctx, pod, network, address)
}
