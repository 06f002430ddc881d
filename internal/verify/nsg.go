package verify

import (
	"crypto/md5" //nolint:gosec // the documented rule names are MD5 hashes, not a security measure
	"encoding/hex"
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/azlb/azlb/internal/annotations"
	"github.com/azlb/azlb/internal/names"
)

// The network security group rules of LoadBalancer Services, as
// docs/security-groups.md describes them.
const (
	docWhoMayConnect = "security-groups.md#who-may-connect"
	docRules         = "security-groups.md#the-rules-azlb-writes"
	docNSGSetup      = "security-groups.md#setting-it-up"

	// A rule is azlb's when its name starts with rulePrefix and its
	// priority is within [minPriority, maxPriority].
	rulePrefix  = "k8s-azure-lb"
	minPriority = 500
	maxPriority = 4096
)

// allowRuleName is the documented name of the allow rule of a family,
// protocol (as written in the rule), sources and ports: the MD5 of
// <protocol>_<sources sorted, joined with ,>_<ports sorted as strings,
// joined with ,>.
func allowRuleName(fam v1.IPFamily, protocol string, sources, ports []string) string {
	s, p := slices.Clone(sources), slices.Clone(ports)
	sort.Strings(s)
	sort.Strings(p)
	sum := md5.Sum([]byte(protocol + "_" + strings.Join(s, ",") + "_" + strings.Join(p, ","))) //nolint:gosec // a name, see above
	return rulePrefix + "_allow_" + ipVersion(fam) + "_" + hex.EncodeToString(sum[:])
}

// denyRuleName is the deny-all rule of a family.
func denyRuleName(fam v1.IPFamily) string { return rulePrefix + "_deny-all_" + ipVersion(fam) }

// ruleProtocol is the protocol of a Service port as written in a rule.
func ruleProtocol(p v1.Protocol) string {
	switch p {
	case v1.ProtocolUDP:
		return "Udp"
	case v1.ProtocolSCTP:
		return "*"
	}
	return "Tcp"
}

// nsgRule is one security rule of the NSG, flattened.
type nsgRule struct {
	name      string
	priority  int32
	access    string
	direction string
	protocol  string
	sources   []string
	dsts      []string
	ports     []string
	srcPorts  []string
}

func flattenRule(r *armnetwork.SecurityRule) nsgRule {
	out := nsgRule{name: ptr.Deref(r.Name, "")}
	p := r.Properties
	if p == nil {
		return out
	}
	out.priority = ptr.Deref(p.Priority, 0)
	out.access = string(ptr.Deref(p.Access, ""))
	out.direction = string(ptr.Deref(p.Direction, ""))
	out.protocol = string(ptr.Deref(p.Protocol, ""))
	both := func(one *string, many []*string) []string {
		var l []string
		if v := ptr.Deref(one, ""); v != "" {
			l = append(l, v)
		}
		for _, v := range many {
			if s := ptr.Deref(v, ""); s != "" {
				l = append(l, s)
			}
		}
		return l
	}
	out.sources = both(p.SourceAddressPrefix, p.SourceAddressPrefixes)
	out.dsts = both(p.DestinationAddressPrefix, p.DestinationAddressPrefixes)
	out.ports = both(p.DestinationPortRange, p.DestinationPortRanges)
	out.srcPorts = both(p.SourcePortRange, p.SourcePortRanges)
	return out
}

func (r nsgRule) owned() bool {
	return len(r.name) >= len(rulePrefix) && strings.EqualFold(r.name[:len(rulePrefix)], rulePrefix) &&
		r.priority >= minPriority && r.priority <= maxPriority
}

func (r nsgRule) isAllow() bool   { return strings.EqualFold(r.access, "Allow") }
func (r nsgRule) isDeny() bool    { return strings.EqualFold(r.access, "Deny") }
func (r nsgRule) inbound() bool   { return strings.EqualFold(r.direction, "Inbound") }
func (r nsgRule) denyAllOf() bool { return r.denyFamily() != "" }

// denyFamily is the family whose deny-all rule r is named as, or "".
func (r nsgRule) denyFamily() v1.IPFamily {
	for _, fam := range []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol} {
		if strings.EqualFold(r.name, denyRuleName(fam)) {
			return fam
		}
	}
	return ""
}

// family of an allow rule's content: its destinations', else its name's.
func (r nsgRule) family() v1.IPFamily {
	for _, d := range r.dsts {
		if a, ok := parseDest(d); ok {
			if a.Is4() {
				return v1.IPv4Protocol
			}
			return v1.IPv6Protocol
		}
	}
	if strings.Contains(strings.ToLower(r.name), "_ipv6_") {
		return v1.IPv6Protocol
	}
	return v1.IPv4Protocol
}

// parseDest reads a destination as one address ("20.0.0.1" or
// "20.0.0.1/32").
func parseDest(s string) (netip.Addr, bool) {
	if a, err := netip.ParseAddr(strings.TrimSpace(s)); err == nil {
		return a.Unmap(), true
	}
	if p, err := netip.ParsePrefix(strings.TrimSpace(s)); err == nil && p.IsSingleIP() {
		return p.Addr().Unmap(), true
	}
	return netip.Addr{}, false
}

// destKey and sourceKey are the comparable forms of a destination and a
// source: canonical addresses and prefixes, other words lower-cased.
func destKey(s string) string {
	if a, ok := parseDest(s); ok {
		return a.String()
	}
	return strings.ToLower(strings.TrimSpace(s))
}

func sourceKey(s string) string {
	if p, err := netip.ParsePrefix(strings.TrimSpace(s)); err == nil {
		return p.String()
	}
	return strings.ToLower(strings.TrimSpace(s))
}

// tuple is one (protocol, source, destination, port) an allow rule grants.
type tuple struct{ proto, src, dst, port string }

func (t tuple) key() tuple {
	return tuple{proto: strings.ToLower(t.proto), src: sourceKey(t.src), dst: destKey(t.dst), port: strings.TrimSpace(t.port)}
}

// nsgService is what verify expects of one LoadBalancer Service in the
// NSG, or, when judged is false, only the destinations it may have there
// (a Service verify does not judge: its rules are left alone).
type nsgService struct {
	svc    *v1.Service
	judged bool
	acc    *access
	// internal, floating: the annotations; floating off sends the traffic
	// to the nodes (destinations: the nodes of its backend pool, ports:
	// its node ports).
	internal, floating bool
	// want: expected tuple (key) -> the tuple as documented and the rule
	// the layout puts it in.
	want map[tuple]wantTuple
	// dests are the Service's expected destinations (keys) per family.
	dests map[v1.IPFamily][]string
	// ports are the (lower-cased protocol, port) pairs its rules carry.
	ports map[[2]string]bool
	// nodeGrants (floating IP off): the (lower-cased protocol, source,
	// port) it may be granted on any node's address (security-groups.md:
	// the rules list every node that may be in a pool, at least those of
	// its pool).
	nodeGrants map[[3]string]bool
	// denyWant: the expected destinations need a deny-all, because of
	// denyWhy; denyForbidden: they must not have one.
	denyWant      bool
	denyWhy       string
	denyForbidden bool
}

type wantTuple struct {
	t    tuple
	rule string
}

// nsgCheck collects, while the Services are checked, what the NSG must
// hold, and then compares.
type nsgCheck struct {
	sg   *armnetwork.SecurityGroup
	obj  string
	svcs []*nsgService
	// feOwners: destination key -> Services whose frontend has that
	// address; npOwners: port -> Services with floating IP off and that
	// node port ("*" for HA ports).
	feOwners map[string][]*nsgService
	npOwners map[string][]*nsgService
	nodeIPs  map[string]bool
	// wantAll: every tuple some judged Service calls for.
	wantAll map[tuple]bool
	// shared: azlb serves a load-balancer class, so the default
	// implementation may write the same rules into this NSG (on AKS, AKS's
	// controller does: install.md, AKS). A destination that is no address
	// of azlb's (ours) may be one of its Services': not judged.
	shared bool
}

func newNSGCheck(s *Snapshot) *nsgCheck {
	if s.SecurityGroup == nil {
		return nil
	}
	c := &nsgCheck{sg: s.SecurityGroup, obj: "security group " + ptr.Deref(s.SecurityGroup.Name, s.Config.SecurityGroupName),
		feOwners: map[string][]*nsgService{}, npOwners: map[string][]*nsgService{}, nodeIPs: map[string]bool{}, shared: !s.Class.IsDefault()}
	for _, n := range s.Nodes {
		for _, a := range n.Status.Addresses {
			if a.Type == v1.NodeInternalIP {
				c.nodeIPs[destKey(a.Address)] = true
			}
		}
	}
	return c
}

// frontendAddress is a frontend's address (its private address, or its
// public IP's), "" when unknown.
func (m *nodeMode) frontendAddress(fe *armnetwork.FrontendIPConfiguration) string {
	p := fe.Properties
	if p == nil {
		return ""
	}
	if p.PublicIPAddress != nil {
		if pip := m.pips[lower(ptr.Deref(p.PublicIPAddress.ID, ""))]; pip != nil && pip.Properties != nil {
			return canonical(ptr.Deref(pip.Properties.IPAddress, ""))
		}
		return ""
	}
	return canonical(ptr.Deref(p.PrivateIPAddress, ""))
}

// nsgClaim records a Service verify does not judge (skipped, or without a
// frontend yet): the addresses of its frontends and its node ports are
// its own, and rules holding them are left alone.
func (m *nodeMode) nsgClaim(svc *v1.Service, base string) {
	if m.nsg == nil {
		return
	}
	ns := &nsgService{svc: svc}
	m.nsg.svcs = append(m.nsg.svcs, ns)
	for _, fes := range m.serviceFrontends(base) {
		for _, fe := range fes {
			if a := m.frontendAddress(fe); a != "" {
				m.nsg.feOwners[destKey(a)] = append(m.nsg.feOwners[destKey(a)], ns)
			}
		}
	}
	// The extra addresses it lists validly, even in an annotation that is
	// invalid otherwise, are its own too (security-groups.md, Destinations).
	for _, a := range annotations.ListedAdditionalIPs(svc) {
		m.nsg.feOwners[destKey(a.String())] = append(m.nsg.feOwners[destKey(a.String())], ns)
	}
	m.nsg.npOwners["*"] = append(m.nsg.npOwners["*"], ns)
	for _, p := range svc.Spec.Ports {
		if p.NodePort != 0 {
			k := fmt.Sprint(p.NodePort)
			m.nsg.npOwners[k] = append(m.nsg.npOwners[k], ns)
		}
	}
}

// nsgExpect records what the NSG must hold for a judged Service
// (security-groups.md, Who may connect; Destinations): its frontends'
// addresses feAddrs (per family, on load balancer lb) and all its
// frontends' addresses on managed load balancers (others).
func (m *nodeMode) nsgExpect(svc *v1.Service, spec *annotations.ServiceSpec, acc *access, lb *armnetwork.LoadBalancer,
	feAddrs map[v1.IPFamily]string, base string) {
	if m.nsg == nil {
		return
	}
	ns := &nsgService{svc: svc, judged: true, acc: acc, internal: spec.Internal, floating: spec.EnableFloatingIP,
		want: map[tuple]wantTuple{}, dests: map[v1.IPFamily][]string{}, ports: map[[2]string]bool{}, nodeGrants: map[[3]string]bool{}}
	m.nsg.svcs = append(m.nsg.svcs, ns)
	for _, fes := range m.serviceFrontends(base) {
		for _, fe := range fes {
			if a := m.frontendAddress(fe); a != "" {
				m.nsg.feOwners[destKey(a)] = append(m.nsg.feOwners[destKey(a)], ns)
			}
		}
	}
	byProto := m.nsgPorts(ns, spec)
	// Its extra addresses (azure-additional-public-ips) are destinations
	// of their family next to the others (security-groups.md,
	// Destinations), of a family the Service has or not.
	fams := families(svc)
	for _, a := range spec.AdditionalPublicIPs {
		m.nsg.feOwners[destKey(a.String())] = append(m.nsg.feOwners[destKey(a.String())], ns)
		if fam := famOfAddr(a); !slices.Contains(fams, fam) {
			fams = append(fams, fam)
		}
	}
	for _, fam := range fams {
		if ns.floating {
			if a := feAddrs[fam]; a != "" {
				ns.dests[fam] = []string{destKey(a)}
			}
		} else if feAddrs[fam] != "" {
			ns.dests[fam] = m.poolNodeIPs(svc, lb, fam)
		}
		for _, a := range spec.AdditionalIPsOf(fam) {
			if !slices.Contains(ns.dests[fam], destKey(a)) {
				ns.dests[fam] = append(ns.dests[fam], destKey(a))
			}
		}
		for _, set := range acc.sourceSets(fam, spec.Internal) {
			for proto, ports := range byProto {
				rule := allowRuleName(fam, proto, set, ports)
				for _, src := range set {
					if !ns.floating { // its node ports on any node, frontend or not (the rules may be written first)
						for _, port := range ports {
							ns.nodeGrants[[3]string{strings.ToLower(proto), sourceKey(src), port}] = true
						}
					}
					for _, d := range ns.dests[fam] {
						for _, port := range ports {
							t := tuple{proto: proto, src: src, dst: d, port: port}
							ns.want[t.key()] = wantTuple{t: t, rule: rule}
						}
					}
				}
			}
		}
	}
	ns.expectDeny(acc)
}

// nsgPorts are the Service's ports per protocol as written in a rule (its
// ports, its node ports with floating IP off, * with HA ports), recorded
// on ns and, with floating IP off, as node ports it owns.
func (m *nodeMode) nsgPorts(ns *nsgService, spec *annotations.ServiceSpec) map[string][]string {
	byProto := map[string][]string{}
	addPort := func(proto, port string) {
		if !slices.Contains(byProto[proto], port) {
			byProto[proto] = append(byProto[proto], port)
		}
		ns.ports[[2]string{strings.ToLower(proto), port}] = true
		if !ns.floating {
			m.nsg.npOwners[port] = append(m.nsg.npOwners[port], ns)
		}
	}
	for _, p := range ns.svc.Spec.Ports {
		proto := ruleProtocol(p.Protocol)
		switch {
		case spec.HAPorts:
			addPort(proto, "*")
		case spec.Ports[p.Port].NoLBRule:
		case ns.floating:
			addPort(proto, fmt.Sprint(p.Port))
		case p.NodePort != 0:
			addPort(proto, fmt.Sprint(p.NodePort))
		}
	}
	return byProto
}

// expectDeny records whether the Service's deny-all rule must be there
// (and why) or must not.
func (ns *nsgService) expectDeny(acc *access) {
	switch {
	case !ns.floating:
		// Deny-all with floating IP off is refused (the Service is
		// skipped); whether the nodes' addresses, shared by every such
		// Service, go into a deny-all for an invalid range the page does
		// not say: not judged.
	case acc.disabled:
		ns.denyForbidden = true
	case len(acc.invalid) > 0:
		ns.denyWant, ns.denyWhy = true, "invalid "+strings.Join(acc.invalid, ", ")+" fails closed"
	case acc.denyAll && acc.hasSources():
		ns.denyWant, ns.denyWhy = true, keyDenyAllExcept+" is true"
	case !acc.denyAll:
		ns.denyForbidden = true
	}
}

// poolNodeIPs are the InternalIPs of the family of the nodes in the
// Service's backend pool on lb, as Azure holds it (security-groups.md,
// Destinations: floating IP off).
func (m *nodeMode) poolNodeIPs(svc *v1.Service, lb *armnetwork.LoadBalancer, fam v1.IPFamily) []string {
	pool := names.ClusterPool(m.cluster, fam)
	if m.multi && isLocal(svc) {
		pool = names.LocalServicePool(svc.Namespace, svc.Name, fam)
	}
	owners := map[string]string{}
	if m.nic {
		for name, vm := range m.s.VMs {
			for _, o := range vm.Owners {
				owners[o] = name
			}
		}
	}
	var out []string
	for _, p := range poolsOf(lb) {
		if !strings.EqualFold(ptr.Deref(p.Name, ""), pool) {
			continue
		}
		for _, e := range entriesOf(p) {
			node := ptr.Deref(e.Name, "")
			if e.Properties != nil && e.Properties.NetworkInterfaceIPConfiguration != nil {
				node = owners[names.IPConfigOwner(ptr.Deref(e.Properties.NetworkInterfaceIPConfiguration.ID, ""))]
			}
			if n := m.nodes[node]; n != nil {
				if ip := internalIP(n, fam); ip != "" && !slices.Contains(out, ip) {
					out = append(out, ip)
				}
			}
		}
	}
	sort.Strings(out)
	return out
}

// ours: the destination (key) is an address of azlb's, a frontend's on its
// load balancers or a node's; without a class, every destination is
// judged as azlb's.
func (c *nsgCheck) ours(dk string) bool {
	return !c.shared || len(c.feOwners[dk]) > 0 || c.nodeIPs[dk]
}

// judges: the rule is judged. With a class (shared), a rule that holds no
// address of azlb's is the other implementation's business, layout
// included.
func (c *nsgCheck) judges(rule nsgRule) bool {
	return !c.shared || slices.ContainsFunc(rule.dsts, func(d string) bool { return c.ours(destKey(d)) })
}

// check compares the NSG with the expectations.
func (c *nsgCheck) check(r *Report) {
	var rules []nsgRule
	if c.sg.Properties != nil {
		for _, sr := range c.sg.Properties.SecurityRules {
			if sr == nil {
				continue
			}
			if fr := flattenRule(sr); fr.owned() {
				rules = append(rules, fr)
			}
		}
	}
	slices.SortFunc(rules, func(a, b nsgRule) int { return strings.Compare(a.name, b.name) })
	r.SecurityRules = len(rules)
	rules = slices.DeleteFunc(rules, func(rule nsgRule) bool { return !c.judges(rule) })

	// What the allow rules grant: tuple key -> rules.
	granted := map[tuple][]string{}
	deny := map[v1.IPFamily]nsgRule{}
	for _, rule := range rules {
		c.checkLayout(r, rule)
		if rule.isDeny() && rule.inbound() {
			if fam := rule.denyFamily(); fam != "" {
				deny[fam] = rule
			}
			continue
		}
		if !rule.isAllow() || !rule.inbound() {
			continue
		}
		for _, src := range rule.sources {
			for _, d := range rule.dsts {
				for _, port := range rule.ports {
					k := tuple{proto: rule.protocol, src: src, dst: d, port: port}.key()
					granted[k] = append(granted[k], rule.name)
				}
			}
		}
	}

	c.wantAll = map[tuple]bool{}
	for _, ns := range c.svcs {
		for k := range ns.want {
			c.wantAll[k] = true
		}
	}
	c.checkMissing(r, granted)
	c.checkGranted(r, rules)
	c.checkDeny(r, rules, deny)
}

// checkLayout: the shape of azlb's rules (security-groups.md, The rules
// azlb writes): allow rules Inbound from source port * and named after
// their content; deny rules only the deny-all ones, Inbound, protocol *,
// from * to every port.
func (c *nsgCheck) checkLayout(r *Report, rule nsgRule) {
	switch {
	case rule.isAllow():
		if !rule.inbound() || !slices.Equal(rule.srcPorts, []string{"*"}) {
			r.add(c.obj, docRules, "allow rule %s is %s from source ports [%s], want Inbound from source port *",
				rule.name, cmpOr(rule.direction, "(no direction)"), strings.Join(rule.srcPorts, ","))
		}
		if want := allowRuleName(rule.family(), rule.protocol, rule.sources, rule.ports); !strings.EqualFold(rule.name, want) {
			r.add(c.obj, docRules, "allow rule %s (%s from %s to ports %s) is not named after its content: want %s",
				rule.name, rule.protocol, strings.Join(rule.sources, ","), strings.Join(rule.ports, ","), want)
		}
	case rule.isDeny() && rule.denyAllOf():
		if !rule.inbound() || rule.protocol != "*" || !slices.Equal(rule.sources, []string{"*"}) || !slices.Equal(rule.ports, []string{"*"}) {
			r.add(c.obj, docRules, "deny rule %s is %s, protocol %s, from [%s] to ports [%s]; want Inbound, protocol *, from * to ports *",
				rule.name, cmpOr(rule.direction, "(no direction)"), rule.protocol, strings.Join(rule.sources, ","), strings.Join(rule.ports, ","))
		}
	default:
		r.add(c.obj, docRules, "rule %s (access %s) is neither an allow rule nor %s/%s of azlb's layout",
			rule.name, cmpOr(rule.access, "(none)"), denyRuleName(v1.IPv4Protocol), denyRuleName(v1.IPv6Protocol))
	}
}

// checkMissing: every tuple a judged Service calls for is granted.
func (c *nsgCheck) checkMissing(r *Report, granted map[tuple][]string) {
	for _, ns := range c.svcs {
		if !ns.judged {
			continue
		}
		// (rule, proto, src, dst) -> missing ports
		missing := map[[4]string][]string{}
		for k, w := range ns.want {
			if len(granted[k]) == 0 {
				g := [4]string{w.rule, w.t.proto, w.t.src, w.t.dst}
				missing[g] = append(missing[g], w.t.port)
			}
		}
		for g, ports := range missing {
			sort.Strings(ports)
			r.add(serviceObject(ns.svc), docWhoMayConnect, "%s: no azlb allow rule lets %s reach %s on %s port %s (want it in rule %s)",
				c.obj, g[2], g[3], g[1], strings.Join(ports, ","), g[0])
		}
	}
}

// checkGranted: every tuple an allow rule grants is called for by a
// Service; otherwise it is a Service open wider than its spec, or a
// destination left behind.
func (c *nsgCheck) checkGranted(r *Report, rules []nsgRule) {
	type extraKey struct {
		ns                    *nsgService
		rule, proto, src, dst string
	}
	extra := map[extraKey][]string{}
	var extraOrder []extraKey
	leftover := map[[2]string][]string{} // (rule, dst) -> ports, for node addresses
	var leftoverOrder [][2]string
	gone := map[[2]string]bool{} // (rule, dst) reported as belonging to nobody
	for _, rule := range rules {
		if !rule.isAllow() || !rule.inbound() {
			continue
		}
		for _, d := range rule.dsts {
			dk := destKey(d)
			for _, src := range rule.sources {
				for _, port := range rule.ports {
					t := tuple{proto: rule.protocol, src: src, dst: d, port: port}
					if c.wantAll[t.key()] {
						continue
					}
					owners := c.feOwners[dk]
					if len(owners) == 0 && c.nodeIPs[dk] {
						owners = c.npOwners[strings.TrimSpace(port)]
						if len(owners) == 0 {
							lk := [2]string{rule.name, dk}
							if _, ok := leftover[lk]; !ok {
								leftoverOrder = append(leftoverOrder, lk)
							}
							if !slices.Contains(leftover[lk], port) {
								leftover[lk] = append(leftover[lk], port)
							}
							continue
						}
					}
					if len(owners) == 0 {
						if !c.ours(dk) {
							continue // with a class: perhaps another implementation's Service's
						}
						if lk := [2]string{rule.name, dk}; !gone[lk] {
							gone[lk] = true
							r.add(c.obj, docRules, "rule %s holds destination %s, which is the address of no LoadBalancer Service's frontend nor of a node: it should have left the rule",
								rule.name, d)
						}
						continue
					}
					if slices.ContainsFunc(owners, func(ns *nsgService) bool { return !ns.judged }) {
						continue // a Service verify does not judge: left alone
					}
					if c.nodeIPs[dk] && slices.ContainsFunc(owners, func(ns *nsgService) bool {
						return ns.nodeGrants[[3]string{strings.ToLower(rule.protocol), sourceKey(src), strings.TrimSpace(port)}]
					}) {
						continue // floating IP off: a node that may be in the pool, on the Service's node port, from its sources
					}
					for _, ns := range owners {
						k := extraKey{ns: ns, rule: rule.name, proto: rule.protocol, src: src, dst: d}
						if _, ok := extra[k]; !ok {
							extraOrder = append(extraOrder, k)
						}
						if !slices.Contains(extra[k], port) {
							extra[k] = append(extra[k], port)
						}
					}
				}
			}
		}
	}
	for _, k := range extraOrder {
		ports := extra[k]
		sort.Strings(ports)
		r.add(serviceObject(k.ns.svc), docWhoMayConnect, "%s: rule %s lets %s reach %s on %s port %s, which the Service does not call for: %s",
			c.obj, k.rule, k.src, k.dst, k.proto, strings.Join(ports, ","), k.ns.whyNot(k.proto, k.dst, ports))
	}
	for _, k := range leftoverOrder {
		ports := leftover[k]
		sort.Strings(ports)
		r.add(c.obj, docRules, "rule %s grants node address %s port %s, which is the node port of no LoadBalancer Service with floating IP off: it should have left the rule",
			k[0], k[1], strings.Join(ports, ","))
	}
}

// whyNot says why the Service does not call for a tuple it is granted.
func (ns *nsgService) whyNot(proto, dst string, ports []string) string {
	if ns.acc.disabled {
		return keyDisableNSGRule + " is true: azlb writes no rule for it and removes those it had"
	}
	fam := v1.IPv4Protocol
	if a, ok := parseDest(dst); ok && a.Is6() {
		fam = v1.IPv6Protocol
	}
	if !slices.Contains(ns.dests[fam], destKey(dst)) {
		what := "its frontend address"
		if !ns.floating {
			what = "the nodes of its backend pool (floating IP off)"
		}
		return fmt.Sprintf("%s is not one of its destinations (%s: %s)", dst, what, cmpOr(strings.Join(ns.dests[fam], ", "), "none"))
	}
	for _, p := range ports {
		if !ns.ports[[2]string{strings.ToLower(proto), strings.TrimSpace(p)}] {
			what := "ports"
			if !ns.floating {
				what = "node ports"
			}
			return fmt.Sprintf("%s %s is not one of its %s", proto, p, what)
		}
	}
	return ns.acc.describe(fam, ns.internal)
}

// deniedByCoTenant: another Service with the address d (a shared IP) calls
// for a deny-all on it, which covers every port of the address
// (security-groups.md, Shared IPs).
func (c *nsgCheck) deniedByCoTenant(ns *nsgService, d string) bool {
	return slices.ContainsFunc(c.feOwners[d], func(o *nsgService) bool { return o != ns && o.judged && o.denyWant })
}

// checkDeny: the deny-all rule of each family holds the addresses of the
// Services that call for one, and none of those whose spec calls for none;
// it comes after the allow rules of the same destinations; it holds no
// destination of nobody.
func (c *nsgCheck) checkDeny(r *Report, rules []nsgRule, deny map[v1.IPFamily]nsgRule) {
	held := map[v1.IPFamily]map[string]bool{}
	for fam, rule := range deny {
		held[fam] = map[string]bool{}
		for _, d := range rule.dsts {
			dk := destKey(d)
			held[fam][dk] = true
			if len(c.feOwners[dk]) == 0 && !c.nodeIPs[dk] && !c.shared { // with a class: perhaps another implementation's
				r.add(c.obj, docRules, "rule %s holds destination %s, which is the address of no LoadBalancer Service's frontend nor of a node: it should have left the rule",
					rule.name, d)
			}
		}
		for _, a := range rules {
			if !a.isAllow() || !a.inbound() || a.priority <= rule.priority {
				continue
			}
			for _, d := range a.dsts {
				if held[fam][destKey(d)] && c.ours(destKey(d)) {
					r.add(c.obj, docRules, "deny rule %s (priority %d) comes before allow rule %s (priority %d) for destination %s: the allow has no effect",
						rule.name, rule.priority, a.name, a.priority, d)
				}
			}
		}
	}
	for _, ns := range c.svcs {
		if !ns.judged {
			continue
		}
		for _, fam := range []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol} {
			for _, d := range ns.dests[fam] {
				switch {
				case ns.denyWant && !held[fam][d]:
					r.add(serviceObject(ns.svc), docWhoMayConnect, "%s: rule %s does not hold its address %s, want it denied: %s",
						c.obj, denyRuleName(fam), d, ns.denyWhy)
				case ns.denyForbidden && held[fam][d] && !c.deniedByCoTenant(ns, d):
					why := "nothing in its spec calls for one"
					if ns.acc.disabled {
						why = keyDisableNSGRule + " is true: azlb writes no rule for it"
					}
					r.add(serviceObject(ns.svc), docWhoMayConnect, "%s: rule %s holds its address %s, but %s",
						c.obj, denyRuleName(fam), d, why)
				}
			}
		}
	}
}

// famOfAddr is the family of an address.
func famOfAddr(a netip.Addr) v1.IPFamily {
	if a.Is4() {
		return v1.IPv4Protocol
	}
	return v1.IPv6Protocol
}
