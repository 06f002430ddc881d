package verify

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/azlb/azlb/internal/annotations"
	"github.com/azlb/azlb/internal/config"
	"github.com/azlb/azlb/internal/names"
	"github.com/azlb/azlb/internal/privatelink"
)

// Refusals (load-balancers.md, Which Services are refused): a Service
// whose settings azlb cannot honour, given what Azure holds, is refused
// whole: nothing of it is written (a Service served before keeps what it
// had). verify derives each refusal from that page and reports the
// Service as one SKIP line naming the reason, never as drift.

// refusal says why azlb refuses the Service, beyond its annotations, ports
// and access settings (checked before): its internal subnet, its Private
// Link Service settings, the public IP it names, a shared IP, its
// placement, Azure's limits. "" when it is served.
func (m *nodeMode) refusal(svc *v1.Service, spec *annotations.ServiceSpec, acc *access, base string) string {
	for _, why := range []func() string{
		func() string { return m.refusedInternal(spec) },
		func() string { return m.refusedPrivateLink(svc, spec) },
		func() string { return m.refusedPublicIP(svc, spec) },
		func() string { return m.refusedSharedIP(svc, spec, base) },
		func() string { return m.refusedPlacement(svc, spec, base) },
		func() string { return m.refusedNSGLimits(svc, spec, acc) },
	} {
		if s := why(); s != "" {
			return s
		}
	}
	return ""
}

// refusedInternal: an internal Service needs a subnet (its annotation or
// azure.json subnetName) and azure.json vnetName.
func (m *nodeMode) refusedInternal(spec *annotations.ServiceSpec) string {
	if spec.Internal && (m.cfg.VnetName == "" || cmpOr(spec.InternalSubnet, m.cfg.SubnetName) == "") {
		return fmt.Sprintf("refused (InvalidLoadBalancerAnnotation): an internal Service needs vnetName and subnetName in azure.json or %s", annotations.KeyInternalSubnet)
	}
	return ""
}

// refusedPrivateLink (private-link.md): an azure-pls-* value that is
// invalid; a Private Link Service asked of a public Service with floating
// IP on or of an IPv6-only Service; a NAT subnet that does not exist, or a
// static NAT address Azure does not hand out in it; a name another
// frontend's Private Link Service has, or a rename.
func (m *nodeMode) refusedPrivateLink(svc *v1.Service, spec *annotations.ServiceSpec) string {
	ps, err := privatelink.Parse(svc.Annotations, privatelink.Defaults{ResourceGroup: plsResourceGroup(m.cfg), Subnet: plsSubnet(m.cfg, svc)})
	if err != nil {
		return fmt.Sprintf("refused (InvalidPrivateLinkService): %v", oneLine(err))
	}
	if !ps.Create {
		return ""
	}
	switch {
	case !spec.Internal && spec.EnableFloatingIP:
		return fmt.Sprintf("refused (InvalidPrivateLinkService): %s on a public Service with floating IP on", privatelink.KeyCreate)
	case !slices.Contains(families(svc), v1.IPv4Protocol):
		return fmt.Sprintf("refused (InvalidPrivateLinkService): %s on an IPv6-only Service", privatelink.KeyCreate)
	}
	sn, read := m.s.Subnets[lower(subnetIDOf(m.cfg, ps.Subnet))]
	switch {
	case !read:
	case sn == nil:
		return fmt.Sprintf("refused (InvalidPrivateLinkService): its NAT subnet %s does not exist (%s)", ps.Subnet, privatelink.KeySubnet)
	default:
		for _, ip := range ps.StaticIPs {
			if !usableAddress(ip, sn) {
				return fmt.Sprintf("refused (InvalidPrivateLinkService): %s lists %s, which Azure does not hand out in NAT subnet %s (%s)",
					privatelink.KeyIPAddresses, ip, ps.Subnet, privatelink.KeyIPAddresses)
			}
		}
	}
	// Names (private-link.md, Ownership and sharing), on the frontend the
	// Service has.
	for _, id := range serviceFrontendIDs(m.s.LoadBalancers, names.FrontendBase(svc)) {
		var onFE *armnetwork.PrivateLinkService
		for _, p := range m.s.PrivateLinks {
			if strings.EqualFold(privatelink.FrontendOf(p), id) {
				onFE = p
			}
		}
		name := ps.NameFor(id)
		switch {
		case onFE != nil && ps.Name != "" && !strings.EqualFold(plsName(onFE), ps.Name) &&
			strings.EqualFold(privatelink.Owner(onFE), svc.Namespace+"/"+svc.Name):
			return fmt.Sprintf("refused (InvalidPrivateLinkService): %s would rename Private Link Service %s; a name never changes", privatelink.KeyName, plsName(onFE))
		case onFE == nil:
			for _, p := range m.s.PrivateLinks {
				if strings.EqualFold(plsName(p), name) && strings.EqualFold(resourceGroupOf(ptr.Deref(p.ID, "")), ps.ResourceGroup) &&
					!strings.EqualFold(privatelink.FrontendOf(p), id) {
					return fmt.Sprintf("refused (InvalidPrivateLinkService): Private Link Service %s already serves another frontend (%s)", name, privatelink.KeyName)
				}
			}
		}
	}
	return ""
}

// usableAddress: ip is in one of the subnet's prefixes, and not one of
// the four first or the last address of it (Azure reserves them).
func usableAddress(ip netip.Addr, sn *armnetwork.Subnet) bool {
	if sn.Properties == nil {
		return false
	}
	for _, s := range append([]*string{sn.Properties.AddressPrefix}, sn.Properties.AddressPrefixes...) {
		p, err := netip.ParsePrefix(ptr.Deref(s, ""))
		if err != nil || !p.Masked().Contains(ip) {
			continue
		}
		p = p.Masked()
		first := p.Addr()
		for range 4 {
			if ip == first {
				return false
			}
			first = first.Next()
		}
		return ip.Next().IsValid() && p.Contains(ip.Next())
	}
	return false
}

// refusedPublicIP (load-balancers.md, Public IPs): an address asked for
// that no public IP of the resource group has, or a public IP named of the
// other IP version.
func (m *nodeMode) refusedPublicIP(svc *v1.Service, spec *annotations.ServiceSpec) string {
	if spec.Internal || (spec.PIPResourceGroup != "" && !strings.EqualFold(spec.PIPResourceGroup, m.cfg.ResourceGroup)) {
		return "" // the public IPs of another resource group are not read
	}
	for _, fam := range families(svc) {
		name := spec.PIPName
		if fam == v1.IPv6Protocol {
			name = spec.PIPNameIPv6
		}
		if addr := requestedAddress(svc, spec, fam); addr != "" && name == "" {
			if !slices.ContainsFunc(m.s.PublicIPs, func(p *armnetwork.PublicIPAddress) bool {
				return p.Properties != nil && canonical(ptr.Deref(p.Properties.IPAddress, "")) == addr
			}) {
				return fmt.Sprintf("refused (PublicIPNotFound): no public IP in resource group %s has the address %s it asks for", m.cfg.ResourceGroup, addr)
			}
			continue
		}
		if name == "" {
			name = names.PublicIP(m.cluster, svc, fam)
		}
		// A public IP to create, or to replace, from a prefix it cannot
		// come from (pipreplace.go).
		var named *armnetwork.PublicIPAddress
		for _, p := range m.s.PublicIPs {
			if strings.EqualFold(ptr.Deref(p.Name, ""), name) {
				named = p
			}
		}
		if named == nil || m.replaceable(svc, spec, fam, named) && replacementDue(spec, fam, named) != "" {
			if why := m.prefixUnusable(spec, fam); why != "" {
				return why
			}
		}
		for _, p := range m.s.PublicIPs {
			if strings.EqualFold(ptr.Deref(p.Name, ""), name) && p.Properties != nil &&
				!strings.EqualFold(string(ptr.Deref(p.Properties.PublicIPAddressVersion, armnetwork.IPVersionIPv4)), ipVersion(fam)) {
				return fmt.Sprintf("refused (PublicIPNotFound): public IP %s is %s, its %s frontend needs %s", name,
					ptr.Deref(p.Properties.PublicIPAddressVersion, ""), fam, ipVersion(fam))
			}
		}
	}
	return ""
}

// wantedFrontends are the frontends, on managed load balancers, that have
// an address the Service asks for (a public IP by name or address, a
// private address in its subnet) and are not its own.
func (m *nodeMode) wantedFrontends(svc *v1.Service, spec *annotations.ServiceSpec, base string) map[string][]*armnetwork.FrontendIPConfiguration {
	out := map[string][]*armnetwork.FrontendIPConfiguration{}
	for _, fam := range families(svc) {
		addr := requestedAddress(svc, spec, fam)
		name := spec.PIPName
		if fam == v1.IPv6Protocol {
			name = spec.PIPNameIPv6
		}
		if spec.Internal && addr == "" || !spec.Internal && addr == "" && name == "" {
			continue
		}
		for lbName, lb := range m.managed {
			if names.IsInternalLB(lbName) != spec.Internal {
				continue
			}
			for _, fe := range frontendsOf(lb) {
				p := fe.Properties
				if p == nil || names.Owns(base, ptr.Deref(fe.Name, "")) {
					continue
				}
				match := false
				switch {
				case spec.Internal:
					match = canonical(ptr.Deref(p.PrivateIPAddress, "")) == addr && p.Subnet != nil && m.vnetID != "" &&
						strings.EqualFold(ptr.Deref(p.Subnet.ID, ""), names.SubnetID(m.vnetID, cmpOr(spec.InternalSubnet, m.cfg.SubnetName)))
				case p.PublicIPAddress != nil:
					pip := m.pips[lower(ptr.Deref(p.PublicIPAddress.ID, ""))]
					match = name != "" && strings.EqualFold(lastSegmentOf(ptr.Deref(p.PublicIPAddress.ID, "")), name) ||
						name == "" && pip != nil && pip.Properties != nil && canonical(ptr.Deref(pip.Properties.IPAddress, "")) == addr
				}
				if match {
					out[lbName] = append(out[lbName], fe)
				}
			}
		}
	}
	return out
}

// refusedSharedIP (load-balancers.md, Sharing an IP): the address the
// Service asks for is on a load balancer its configurations do not allow,
// or another Service has one of its ports and protocols there.
func (m *nodeMode) refusedSharedIP(svc *v1.Service, spec *annotations.ServiceSpec, base string) string {
	for lbName, fes := range m.wantedFrontends(svc, spec, base) {
		lb := m.managed[lbName]
		realName := ptr.Deref(lb.Name, lbName)
		if m.multi && len(spec.LoadBalancerConfigurations) > 0 &&
			!slices.ContainsFunc(spec.LoadBalancerConfigurations, func(c string) bool { return strings.EqualFold(c, names.PublicLB(realName)) }) {
			return fmt.Sprintf("refused (SharedIPPlacementConflict): its IP is shared on load balancer %s, which %s does not allow",
				realName, annotations.KeyLoadBalancerConfigurations)
		}
		for _, fe := range fes {
			for _, r := range rulesOf(lb) {
				n := ptr.Deref(r.Name, "")
				if r.Properties == nil || names.Owns(base, n) || !strings.EqualFold(childName(r.Properties.FrontendIPConfiguration), ptr.Deref(fe.Name, "")) {
					continue
				}
				proto, port := string(ptr.Deref(r.Properties.Protocol, "")), ptr.Deref(r.Properties.FrontendPort, 0)
				for _, sp := range svc.Spec.Ports {
					if spec.Ports[sp.Port].NoLBRule {
						continue
					}
					if spec.HAPorts || strings.EqualFold(proto, "All") || strings.EqualFold(proto, string(protocolOf(sp))) && port == sp.Port {
						return fmt.Sprintf("refused (SharedIPPortConflict): port %s/%d on its IP is another Service's (rule %s)", protocolOf(sp), sp.Port, n)
					}
				}
			}
		}
	}
	return ""
}

func protocolOf(sp v1.ServicePort) v1.Protocol {
	if sp.Protocol == "" {
		return v1.ProtocolTCP
	}
	return sp.Protocol
}

// refusedPlacement (multiple-load-balancers.md, Service placement): in
// multiple-SLB mode, no configuration the Service may be on (the names it
// asks for, the selectors), or, for a Service not on a load balancer yet,
// none with room for its rules under maximumLoadBalancerRuleCount; in
// either mode, a load balancer it is on or goes to without that room.
func (m *nodeMode) refusedPlacement(svc *v1.Service, spec *annotations.ServiceSpec, base string) string {
	rules := len(svc.Spec.Ports) * len(families(svc))
	if spec.HAPorts {
		rules = len(families(svc))
	}
	limit := m.cfg.MaximumLoadBalancerRuleCount
	room := func(lbName string) bool {
		lb := m.managed[lower(lbName)]
		if limit <= 0 || lb == nil {
			return limit <= 0 || rules <= limit
		}
		have := 0
		for _, r := range rulesOf(lb) {
			if !names.Owns(base, ptr.Deref(r.Name, "")) {
				have++
			}
		}
		return have+rules <= limit
	}
	onLB := len(m.serviceFrontends(base)) > 0
	if !m.multi {
		if lbName := names.LoadBalancer(m.defaultLB, spec.Internal); !room(lbName) {
			return fmt.Sprintf("refused (LoadBalancerRuleLimitExceeded): load balancer %s has no room for its %d rules under maximumLoadBalancerRuleCount %d", lbName, rules, limit)
		}
		return ""
	}
	// The configuration it is on now (where its frontends are).
	current := ""
	for lbName := range m.serviceFrontends(base) {
		current = names.PublicLB(ptr.Deref(m.managed[lbName].Name, lbName))
	}
	var eligible []string
	for _, c := range m.cfg.MultipleStandardLoadBalancerConfigurations {
		if req := spec.LoadBalancerConfigurations; len(req) > 0 && !slices.ContainsFunc(req, func(n string) bool { return strings.EqualFold(n, c.Name) }) {
			continue
		}
		if !selectorMatches(c.ServiceNamespaceSelector, m.s.Namespaces[svc.Namespace]) || !selectorMatches(c.ServiceLabelSelector, svc.Labels) {
			continue
		}
		if !c.ServicePlacementAllowed() && !strings.EqualFold(c.Name, current) {
			continue // allowServicePlacement false: only the Services already there stay
		}
		eligible = append(eligible, c.Name)
	}
	for _, n := range spec.LoadBalancerConfigurations {
		if !slices.ContainsFunc(m.cfg.MultipleStandardLoadBalancerConfigurations, func(c config.MultipleStandardLoadBalancerConfiguration) bool {
			return strings.EqualFold(c.Name, n)
		}) {
			return fmt.Sprintf("refused (LoadBalancerPlacementFailed): %s names %s, which is no configuration", annotations.KeyLoadBalancerConfigurations, n)
		}
	}
	if len(eligible) == 0 {
		return "refused (LoadBalancerPlacementFailed): no load balancer configuration accepts it (names asked for, namespace and label selectors, allowServicePlacement)"
	}
	if !onLB && limit > 0 && !slices.ContainsFunc(eligible, func(c string) bool { return room(names.LoadBalancer(c, spec.Internal)) }) {
		return fmt.Sprintf("refused (LoadBalancerPlacementFailed): no load balancer it may be on has room for its %d rules under maximumLoadBalancerRuleCount %d", rules, limit)
	}
	return ""
}

// refusedNSGLimits (security-groups.md, Limits): the rules the Service
// needs would take the network security group over Azure's limits (1,000
// rules, 4,000 source prefixes), counting what the group holds.
func (m *nodeMode) refusedNSGLimits(svc *v1.Service, spec *annotations.ServiceSpec, acc *access) string {
	if m.nsg == nil || acc == nil || acc.disabled {
		return ""
	}
	existing := map[string]bool{}
	rules, srcs := 0, 0
	if m.nsg.sg.Properties != nil {
		for _, r := range m.nsg.sg.Properties.SecurityRules {
			if r == nil {
				continue
			}
			fr := flattenRule(r)
			existing[lower(fr.name)] = true
			rules++
			srcs += len(fr.sources)
		}
	}
	byProto := map[string][]string{}
	for _, p := range svc.Spec.Ports {
		port := fmt.Sprint(p.Port)
		switch {
		case spec.Ports[p.Port].NoLBRule:
			continue
		case spec.HAPorts:
			port = "*"
		case !spec.EnableFloatingIP:
			port = fmt.Sprint(p.NodePort)
		}
		proto := ruleProtocol(p.Protocol)
		if !slices.Contains(byProto[proto], port) {
			byProto[proto] = append(byProto[proto], port)
		}
	}
	// The rules it needs that the group does not hold yet (a rule is
	// shared by every destination with the same content).
	for _, fam := range families(svc) {
		for _, set := range acc.sourceSets(fam, spec.Internal) {
			for proto, ports := range byProto {
				if n := lower(allowRuleName(fam, proto, set, ports)); !existing[n] {
					existing[n] = true
					rules++
					srcs += len(set)
				}
			}
		}
	}
	switch {
	case srcs > 4000:
		return fmt.Sprintf("refused (SecurityRuleLimitExceeded): its rules would take the network security group to %d source address prefixes, more than Azure's 4,000", srcs)
	case rules > 1000:
		return fmt.Sprintf("refused (SecurityRuleLimitExceeded): its rules would take the network security group to %d rules, more than Azure's 1,000", rules)
	}
	return ""
}

// oneLine keeps a joined error on one line.
func oneLine(err error) string { return strings.ReplaceAll(err.Error(), "\n", "; ") }
