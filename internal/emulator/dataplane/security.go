package dataplane

import (
	"fmt"
	"net/netip"
	"strings"
)

// Access is what a security rule does with the flows it matches.
type Access string

// The accesses ARM accepts.
const (
	AccessAllow Access = "Allow"
	AccessDeny  Access = "Deny"
)

// DeniedNoNSG is the rule name under which flows and probes are counted
// that were refused because the member has no network security group at
// all (neither on its subnet nor on its NIC) and its load balancer is not
// open by default (Standard SKU).
const DeniedNoNSG = "NoNetworkSecurityGroup"

// noMatch names the verdict of a group in which no rule matched.
const noMatch = "(no matching rule)"

// ProbeSource is where health probes to IPv4 members come from as the
// network security groups see them: the AzureLoadBalancer service tag's
// address (the port is fixed, at the start of the IANA ephemeral range).
var ProbeSource = netip.AddrPortFrom(netip.AddrFrom4([4]byte{168, 63, 129, 16}), 49152)

// ProbeSourcesIPv6 are where health probes to IPv6 members come from as
// the network security groups see them. Azure documents only that its
// IPv6 probes come from a link-local address: these two stand for it
// (their digits recall 168.63.129.16). Both are in the AzureLoadBalancer
// tag; whether Azure's address is in VirtualNetwork, as 168.63.129.16 is,
// is not documented, so the first is and the second is not, and a probe
// must pass the security groups from both (strictest reading: it gets
// through only where it would whichever way Azure counts it).
var ProbeSourcesIPv6 = [2]netip.AddrPort{
	netip.AddrPortFrom(netip.MustParseAddr("fe80::168:63:129:16"), 49152),
	netip.AddrPortFrom(netip.MustParseAddr("fe80::168:63:129:17"), 49152),
}

// probeSources are the sources of probes to member a.
func probeSources(a netip.Addr) []netip.AddrPort {
	if a.Unmap().Is4() {
		return []netip.AddrPort{ProbeSource}
	}
	return ProbeSourcesIPv6[:]
}

// PortRange is an inclusive range of ports.
type PortRange struct{ From, To uint16 }

// AllPorts is the range "*" stands for.
var AllPorts = PortRange{0, 65535}

func (r PortRange) contains(p uint16) bool { return r.From <= p && p <= r.To }

// SecurityRule is one inbound security rule of a network security group
// with its service tags already resolved to prefixes ("*" is 0.0.0.0/0
// and ::/0). An empty address or port list matches nothing.
type SecurityRule struct {
	Name     string
	Priority int
	Access   Access
	// Protocol as ARM spells it: Tcp, Udp, Icmp, Esp, Ah or * (any).
	Protocol                      string
	Sources, Destinations         []netip.Prefix
	SourcePorts, DestinationPorts []PortRange
}

// matches reports whether the rule applies to a flow.
func (r *SecurityRule) matches(proto Protocol, src, dst netip.AddrPort) bool {
	if r.Protocol != "*" && !strings.EqualFold(r.Protocol, string(proto)) {
		return false
	}
	return containsAddr(r.Sources, src.Addr()) && containsPort(r.SourcePorts, src.Port()) &&
		containsAddr(r.Destinations, dst.Addr()) && containsPort(r.DestinationPorts, dst.Port())
}

func containsAddr(ps []netip.Prefix, a netip.Addr) bool {
	a = a.Unmap()
	for _, p := range ps {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

func containsPort(rs []PortRange, p uint16) bool {
	for _, r := range rs {
		if r.contains(p) {
			return true
		}
	}
	return false
}

// SecurityGroup is a network security group: its ARM id and its inbound
// rules, custom and default (AllowVnetInBound, AllowAzureLoadBalancerInBound,
// DenyAllInBound), in any order: the lowest priority number that matches
// wins.
type SecurityGroup struct {
	ID    string
	Rules []SecurityRule
}

// evaluate returns the rule deciding a flow, nil when none matches.
func (g *SecurityGroup) evaluate(proto Protocol, src, dst netip.AddrPort) *SecurityRule {
	var best *SecurityRule
	for i := range g.Rules {
		r := &g.Rules[i]
		if (best == nil || r.Priority < best.Priority) && r.matches(proto, src, dst) {
			best = r
		}
	}
	return best
}

// Security is what guards a member's inbound traffic in Azure: the
// network security groups of its subnet and of its network interface.
// A nil *Security is a member with neither, on a load balancer that is
// not open by default: nothing reaches it.
type Security struct {
	// Subnet and NIC are the security groups of the member's subnet and
	// network interface; nil when that level has none (it then lets
	// everything through, as in Azure).
	Subnet, NIC *SecurityGroup
	// Open lets traffic through when neither level has a security group
	// (a Basic load balancer: open by default). Standard load balancers
	// are closed by default: their members need a security group.
	Open bool
}

// OpenSecurity is a member that every flow reaches: no security group and
// open by default.
func OpenSecurity() *Security { return &Security{Open: true} }

// Verdict is the outcome of evaluating a flow: whether it may reach the
// member and, when a rule decided, which one (NSG "" and Rule DeniedNoNSG
// when the member has no security group and is closed by default).
type Verdict struct {
	Allowed   bool
	NSG, Rule string
}

func (v Verdict) String() string {
	if v.NSG == "" {
		return v.Rule
	}
	return fmt.Sprintf("%s rule %s", v.NSG, v.Rule)
}

// Evaluate decides an inbound flow as Azure does: the subnet's security
// group first (a deny there ends it), then the NIC's; both must allow.
// Within one group the matching rule with the lowest priority number
// decides. src is the client's address and port, dst the destination as
// the security groups see it (the frontend's with floating IP, the
// member's otherwise).
func (s *Security) Evaluate(proto Protocol, src, dst netip.AddrPort) Verdict {
	if s == nil || (s.Subnet == nil && s.NIC == nil) {
		if s != nil && s.Open {
			return Verdict{Allowed: true}
		}
		return Verdict{Rule: DeniedNoNSG}
	}
	v := Verdict{Allowed: true}
	for _, g := range []*SecurityGroup{s.Subnet, s.NIC} {
		if g == nil {
			continue
		}
		r := g.evaluate(proto, src, dst)
		if r == nil {
			// Every group holds DenyAllInBound; one that does not (a
			// hand-built configuration) denies what nothing allows.
			return Verdict{NSG: g.ID, Rule: noMatch}
		}
		v = Verdict{Allowed: strings.EqualFold(string(r.Access), string(AccessAllow)), NSG: g.ID, Rule: r.Name}
		if !v.Allowed {
			return v
		}
	}
	return v
}

// groups returns the security groups of s, for status and bookkeeping.
func (s *Security) groups() []*SecurityGroup {
	if s == nil {
		return nil
	}
	var out []*SecurityGroup
	for _, g := range []*SecurityGroup{s.Subnet, s.NIC} {
		if g != nil {
			out = append(out, g)
		}
	}
	return out
}
