package emulator

import (
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/azlb/azlb/internal/emulator/dataplane"
)

// gatewayMembers lists, by backend pool (lower-cased ID), the pod
// addresses every live service gateway registers for the Inbound services
// that name the pool: the members a load balancer of SKU Service sends its
// rules' flows to (state lock held).
//
// A pod is connected to at its own address, or at its loopback alias
// (Options.PodLoopback). It is reached through its address location (its node), so the
// security groups of the node's subnet and network interface guard it,
// with the pod's address as the destination; a pod whose node has neither
// gets nothing, as a Standard load balancer's member gets nothing without
// a group (strictest reading, docs/emulator.md). Every pool an Inbound
// service names has a key, members or not.
func (e *Emulator) gatewayMembers(now time.Time, ix *secIndex) map[string][]dataplane.Member {
	out := map[string][]dataplane.Member{}
	e.forEachGateway(now, func(_ string, st *sgwState) bool {
		for _, svc := range st.services {
			if strings.Contains(strings.ToLower(svc.typ), "inbound") {
				for _, p := range svc.pools {
					if _, ok := out[strings.ToLower(p.id)]; !ok {
						out[strings.ToLower(p.id)] = nil // a gateway pool, even without members
					}
				}
			}
		}
		for _, loc := range st.sortedLocations() {
			l := st.locs[loc]
			addrs := make([]netip.Addr, 0, len(l.addrs))
			for a := range l.addrs {
				addrs = append(addrs, a)
			}
			slices.SortFunc(addrs, func(a, b netip.Addr) int { return a.Compare(b) })
			for _, a := range addrs {
				for _, name := range l.addrs[a] {
					svc := st.services[strings.ToLower(name)]
					if svc == nil || !strings.Contains(strings.ToLower(svc.typ), "inbound") {
						continue
					}
					for _, p := range svc.pools {
						m := dataplane.Member{Pool: p.id, Name: a.String(), Addr: a,
							Security: ix.memberSecurity(p.vnet, "", loc, false)}
						if d, ok := e.opts.PodLoopback.Map(a); ok {
							m.Dial = d
						}
						out[strings.ToLower(p.id)] = append(out[strings.ToLower(p.id)], m)
					}
				}
			}
		}
		return true
	})
	return out
}
