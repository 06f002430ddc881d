package accesscontrol

import (
	"sort"
	"strconv"

	v1 "k8s.io/api/core/v1"

	"github.com/azlb/azlb/internal/securitygroup"
)

// Port is one port a Service's rules cover.
type Port struct {
	Protocol v1.Protocol
	// Number is the Service port (floating IP on) or node port (off); 0
	// means every port (HA ports).
	Number int32
}

// RuleProtocol is the security rule protocol of a Service port protocol:
// Tcp, Udp, or * (SCTP).
func RuleProtocol(p v1.Protocol) string {
	switch p {
	case v1.ProtocolUDP:
		return "Udp"
	case v1.ProtocolSCTP:
		return "*"
	}
	return "Tcp"
}

// PortString is a port as a rule writes it ("*" for every port).
func PortString(n int32) string {
	if n == 0 {
		return "*"
	}
	return strconv.Itoa(int(n))
}

// Grants lays out what the Service needs: one allow per (family, protocol,
// source set) with the protocol's ports and the family's destinations, and
// a deny per family when DenyAll.
func (a *Access) Grants(ports []Port, destinations map[v1.IPFamily][]string) ([]securitygroup.Allow, []securitygroup.Deny) {
	if a.Disabled {
		return nil, nil
	}
	byProto := map[string]map[string]bool{}
	for _, p := range ports {
		proto := RuleProtocol(p.Protocol)
		if byProto[proto] == nil {
			byProto[proto] = map[string]bool{}
		}
		byProto[proto][PortString(p.Number)] = true
	}
	protos := make([]string, 0, len(byProto))
	for p := range byProto {
		protos = append(protos, p)
	}
	sort.Strings(protos)
	var allows []securitygroup.Allow
	var denies []securitygroup.Deny
	for _, fam := range []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol} {
		dsts := destinations[fam]
		if len(dsts) == 0 {
			continue
		}
		sf := ruleFamily(fam)
		for _, src := range a.Sources(fam) {
			for _, proto := range protos {
				ps := make([]string, 0, len(byProto[proto]))
				for p := range byProto[proto] {
					ps = append(ps, p)
				}
				sort.Strings(ps)
				allows = append(allows, securitygroup.Allow{Family: sf, Protocol: proto, Sources: src, Ports: ps, Destinations: dsts})
			}
		}
		if a.DenyAll {
			denies = append(denies, securitygroup.Deny{Family: sf, Destinations: dsts})
		}
	}
	return allows, denies
}

func ruleFamily(f v1.IPFamily) securitygroup.Family {
	if f == v1.IPv6Protocol {
		return securitygroup.IPv6
	}
	return securitygroup.IPv4
}
