package verify

import (
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"

	"github.com/azlb/azlb/internal/annotations"
	"github.com/azlb/azlb/internal/config"
	"github.com/azlb/azlb/internal/names"
)

// nodeMode checks node-pool load balancing (IP- or NIC-based pools):
// docs/load-balancers.md, multiple-load-balancers.md, admin-state.md,
// nic-pools.md.
type nodeMode struct {
	s   *Snapshot
	cfg *config.Config
	r   *Report

	cluster   string
	defaultLB string
	multi     bool
	nic       bool
	vnetID    string

	// managed load balancers by lower-cased name.
	managed map[string]*armnetwork.LoadBalancer
	pips    map[string]*armnetwork.PublicIPAddress // lower-cased id
	nodes   map[string]*v1.Node

	// bases of every Service that may own load balancer children (checked
	// or skipped), lower-cased, and its key.
	bases map[string]string
	// referencedPIPs: lower-cased public IP id -> the frontend's Service key.
	referencedPIPs map[string]string
	// localPools: lower-cased load balancer -> lower-cased pool -> the
	// Local Service and family that own it.
	localPools map[string]map[string]localPool

	// nsg collects what the network security group must hold; nil when
	// there is none to check (security-groups.md).
	nsg *nsgCheck
	// claimed: lower-cased load balancer -> lower-cased pools of Services
	// not judged (refused: what they have is left as it is).
	claimed map[string]map[string]bool
	// refused: lower-cased keys of the Services azlb refuses.
	refused map[string]bool
}

type localPool struct {
	svc *v1.Service
	fam v1.IPFamily
}

func newNodeMode(s *Snapshot, r *Report) *nodeMode {
	cfg := s.Config
	m := &nodeMode{
		s: s, cfg: cfg, r: r,
		cluster:   cfg.ClusterName,
		defaultLB: cfg.DefaultLoadBalancerName(),
		multi:     len(cfg.MultipleStandardLoadBalancerConfigurations) > 0,
		nic:       nicBased(cfg),
		managed:   map[string]*armnetwork.LoadBalancer{},
		pips:      map[string]*armnetwork.PublicIPAddress{},
		nodes:     map[string]*v1.Node{},
		bases:     map[string]string{}, referencedPIPs: map[string]string{},
		localPools: map[string]map[string]localPool{},
		nsg:        newNSGCheck(s),
		claimed:    map[string]map[string]bool{}, refused: map[string]bool{},
	}
	if cfg.VnetName != "" {
		m.vnetID = names.VirtualNetworkID(cfg.NetworkSubscriptionID(), cmpOr(cfg.VnetResourceGroup, cfg.ResourceGroup), cfg.VnetName)
	}
	for _, p := range s.PublicIPs {
		if p.ID != nil {
			m.pips[lower(*p.ID)] = p
		}
	}
	for _, n := range s.Nodes {
		m.nodes[n.Name] = n
	}
	for _, lb := range s.LoadBalancers {
		if m.isManaged(lb) {
			m.managed[lower(ptr.Deref(lb.Name, ""))] = lb
		}
	}
	return m
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// configNames are the configured load balancers: the default one, or the
// multiple-SLB configurations, lower-cased.
func (m *nodeMode) configNames() []string {
	if !m.multi {
		return []string{lower(m.defaultLB)}
	}
	out := make([]string, 0, len(m.cfg.MultipleStandardLoadBalancerConfigurations))
	for _, c := range m.cfg.MultipleStandardLoadBalancerConfigurations {
		out = append(out, lower(c.Name))
	}
	return out
}

// isManaged (load-balancers.md, step 4 of a reconcile): a Standard load
// balancer that is configured, holds the cluster's node pool or carries
// the cluster tag.
func (m *nodeMode) isManaged(lb *armnetwork.LoadBalancer) bool {
	if lb.SKU == nil || !strings.EqualFold(string(ptr.Deref(lb.SKU.Name, "")), "Standard") {
		return false
	}
	name := lower(ptr.Deref(lb.Name, ""))
	if slices.Contains(m.configNames(), lower(names.PublicLB(name))) {
		return true
	}
	if v, ok := tagValue(lb.Tags, names.TagClusterName); ok && strings.EqualFold(v, m.cluster) {
		return true
	}
	for _, p := range poolsOf(lb) {
		for _, fam := range []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol} {
			if strings.EqualFold(ptr.Deref(p.Name, ""), names.ClusterPool(m.cluster, fam)) {
				return true
			}
		}
	}
	return false
}

func (m *nodeMode) check() {
	for _, svc := range m.s.Services {
		m.checkService(svc)
	}
	for _, name := range sortedKeys(m.managed) {
		lb := m.managed[name]
		m.checkLeftovers(lb)
		m.checkPools(lb)
	}
	if m.multi {
		m.checkNodePlacement()
	}
	m.checkPublicIPs()
	if m.nsg != nil {
		m.nsg.check(m.r)
	}
}

func sortedKeys[V any](mp map[string]V) []string {
	out := make([]string, 0, len(mp))
	for k := range mp {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// serviceFrontends finds the frontends owned by base on managed load
// balancers: load balancer name -> frontends.
func (m *nodeMode) serviceFrontends(base string) map[string][]*armnetwork.FrontendIPConfiguration {
	out := map[string][]*armnetwork.FrontendIPConfiguration{}
	for name, lb := range m.managed {
		shared := map[string]bool{} // frontends the Service's rules use
		for _, r := range rulesOf(lb) {
			if names.Owns(base, ptr.Deref(r.Name, "")) && r.Properties != nil {
				shared[lower(childName(r.Properties.FrontendIPConfiguration))] = true
			}
		}
		for _, fe := range frontendsOf(lb) {
			if n := ptr.Deref(fe.Name, ""); names.Owns(base, n) || shared[lower(n)] {
				out[name] = append(out[name], fe)
			}
		}
	}
	return out
}

// sharedFamily is the family of a shared frontend (another Service's) the
// Service's rules use: that of its rules on it ("" when none uses it).
func sharedFamily(lb *armnetwork.LoadBalancer, base, frontend string) (v1.IPFamily, bool) {
	for _, r := range rulesOf(lb) {
		n := ptr.Deref(r.Name, "")
		if !names.Owns(base, n) || r.Properties == nil || !strings.EqualFold(childName(r.Properties.FrontendIPConfiguration), frontend) {
			continue
		}
		if names.HasSuffixFold(n, names.IPv6Suffix) {
			return v1.IPv6Protocol, true
		}
		return v1.IPv4Protocol, true
	}
	return "", false
}

func (m *nodeMode) checkService(svc *v1.Service) {
	obj := serviceObject(svc)
	if othersLoadBalancer(m.s.Class, svc) {
		m.leaveAlone(svc)
		return
	}
	if !wantsLoadBalancer(m.s.Class, svc) {
		return
	}
	base := lower(names.FrontendBase(svc))
	m.bases[base] = svc.Namespace + "/" + svc.Name
	spec, err := annotations.Parse(svc)
	if err != nil {
		m.r.skip(obj, "refused (InvalidLoadBalancerAnnotation): invalid annotations, azlb writes nothing for it until they are fixed: %v", oneLine(err))
		m.noteFrontendPIPs(svc, base)
		m.nsgClaim(svc, base)
		m.claimPools(svc)
		m.refused[lower(svc.Namespace+"/"+svc.Name)] = true
		return
	}
	if why := refusedPorts(svc, spec); why != "" {
		m.r.skip(obj, "%s", why)
		m.noteFrontendPIPs(svc, base)
		m.nsgClaim(svc, base)
		m.claimPools(svc)
		m.refused[lower(svc.Namespace+"/"+svc.Name)] = true
		return
	}
	acc, why := m.accessOf(spec, svc)
	if why == "" {
		why = m.refusal(svc, spec, acc, base)
	}
	if why != "" {
		m.r.skip(obj, "%s", why)
		m.noteFrontendPIPs(svc, base)
		m.nsgClaim(svc, base)
		m.claimPools(svc)
		m.refused[lower(svc.Namespace+"/"+svc.Name)] = true
		return
	}
	found := m.serviceFrontends(base)
	fams := families(svc)
	if len(found) == 0 {
		m.nsgClaim(svc, base) // no frontend yet: nothing expected in the NSG
		m.r.add(obj, "load-balancers.md#what-azlb-creates", "has no frontend on any managed load balancer (want %s)", frontendNames(svc, fams))
		if ips := ingressIPs(svc); len(ips) > 0 {
			m.r.add(obj, "load-balancers.md#how-a-reconcile-works", "status.loadBalancer.ingress lists %v but no frontend has those addresses", ips)
		}
		return
	}
	lbNames := sortedKeys(found)
	if len(lbNames) > 1 {
		m.r.add(obj, "multiple-load-balancers.md#restarts", "has frontends on %d load balancers (%s); a Service is on exactly one", len(lbNames), strings.Join(lbNames, ", "))
	}
	lbName := m.pickLB(lbNames, spec.Internal)
	lb := m.managed[lbName]
	lbRealName := ptr.Deref(lb.Name, lbName)
	m.checkPlacement(svc, spec, lbRealName)

	// Frontends, one per family, and the ingress addresses they give.
	want := map[string]v1.IPFamily{}
	for _, fam := range fams {
		want[lower(names.Frontend(svc, fam))] = fam
	}
	var ingress []string
	feAddrs := map[v1.IPFamily]string{}
	seen := map[string]bool{}
	feOf := map[v1.IPFamily]string{}
	for _, fe := range found[lbName] {
		feName := lower(ptr.Deref(fe.Name, ""))
		fam, ok := want[feName]
		if !ok && spec.InternalSubnet != "" {
			// The Azure cloud provider's name for an internal Service's
			// frontend with azure-load-balancer-internal-subnet
			// (a<uid>-<subnet>), which azlb keeps.
			for _, f := range fams {
				if feName == lower(names.FrontendBase(svc)+"-"+spec.InternalSubnet+names.FamilySuffix(f)) {
					fam, ok = f, true
					delete(want, lower(names.Frontend(svc, f)))
					seen[lower(names.Frontend(svc, f))] = true
				}
			}
		}
		if !ok && !names.Owns(base, feName) {
			// Another Service's frontend the Service shares.
			if fam, ok = sharedFamily(lb, base, feName); ok {
				want[feName] = fam
				delete(want, lower(names.Frontend(svc, fam)))
				seen[lower(names.Frontend(svc, fam))] = true
			}
		}
		if !ok {
			m.r.add(obj, "load-balancers.md#what-azlb-creates", "load balancer %s has frontend %s, which is not one of its families (%s)", lbRealName, ptr.Deref(fe.Name, ""), famList(fams))
			continue
		}
		seen[feName] = true
		feOf[fam] = ptr.Deref(fe.Name, "")
		if addr := m.checkFrontend(svc, spec, lbRealName, fe, fam); addr != "" {
			ingress = append(ingress, addr)
			feAddrs[fam] = addr
		}
	}
	for _, fam := range fams {
		if fe := names.Frontend(svc, fam); !seen[lower(fe)] {
			m.r.add(obj, "load-balancers.md#what-azlb-creates", "load balancer %s has no frontend %s (%s)", lbRealName, fe, fam)
		}
	}
	m.checkIngress(svc, ingress)
	m.checkRulesAndProbes(svc, spec, lb, fams, feOf)
	m.nsgExpect(svc, spec, acc, lb, feAddrs, base)
	if m.multi && isLocal(svc) {
		for _, fam := range fams {
			pools := m.localPools[lbName]
			if pools == nil {
				pools = map[string]localPool{}
				m.localPools[lbName] = pools
			}
			pools[lower(names.LocalServicePool(svc.Namespace, svc.Name, fam))] = localPool{svc: svc, fam: fam}
		}
	}
}

// leaveAlone records a LoadBalancer Service of another implementation: it
// is not judged, and what carries its name on azlb's load balancers (left
// there when it stopped being azlb's while no controller ran: install.md,
// AKS) is listed as skipped, not as a leftover azlb would remove. Its
// frontends' addresses and node ports in the NSG are its own.
func (m *nodeMode) leaveAlone(svc *v1.Service) {
	base := lower(names.FrontendBase(svc))
	m.bases[base] = svc.Namespace + "/" + svc.Name
	m.noteFrontendPIPs(svc, base)
	m.nsgClaim(svc, base)
	if found := m.serviceFrontends(base); len(found) > 0 {
		m.r.skip(serviceObject(svc), "a LoadBalancer Service of another implementation (%s), yet load balancer %s of azlb's holds its frontends: left alone",
			className(svc), strings.Join(sortedKeys(found), ", "))
	}
}

// accessOf reads the Service's access-control inputs
// (security-groups.md); a reason is returned for a Service azlb writes
// nothing for: ranges both in the spec and an annotation, deny-all with
// floating IP off, a restricted Service without securityGroupName, or an
// access annotation that is not a boolean (the page does not say).
func (m *nodeMode) accessOf(spec *annotations.ServiceSpec, svc *v1.Service) (*access, string) {
	acc, why := parseAccess(svc)
	switch {
	case why != "":
		return nil, why
	case acc.disabled:
	case acc.denyAll && acc.sourcesGiven && !spec.EnableFloatingIP:
		return nil, "refused (ConflictingAccessConfiguration): " + keyDenyAllExcept + " with floating IP off (" + annotations.KeyDisableFloatingIP +
			"): azlb writes nothing for it"
	case len(acc.invalid) > 0 && !spec.EnableFloatingIP:
		return nil, "refused (ConflictingAccessConfiguration): an invalid (or blank) source range, service tag or access annotation with floating IP off (" +
			annotations.KeyDisableFloatingIP + ": failing closed would need a deny-all on the nodes): azlb writes nothing for it"
	}
	if m.cfg.SecurityGroupName == "" && acc.restricted && !acc.disabled {
		return nil, "refused (SecurityGroupNotConfigured): restricts its sources but azure.json names no securityGroupName: azlb writes nothing for it"
	}
	return acc, ""
}

// claimPools records the dedicated pools a skipped Service has on any
// managed load balancer (a Local Service served before its change was
// refused keeps them), so they are not reported as leftovers.
func (m *nodeMode) claimPools(svc *v1.Service) {
	for lbName, lb := range m.managed {
		for _, p := range poolsOf(lb) {
			for _, fam := range []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol} {
				if n := ptr.Deref(p.Name, ""); strings.EqualFold(n, names.LocalServicePool(svc.Namespace, svc.Name, fam)) {
					if m.claimed[lbName] == nil {
						m.claimed[lbName] = map[string]bool{}
					}
					m.claimed[lbName][lower(n)] = true
				}
			}
		}
	}
}

// noteFrontendPIPs records the public IPs a skipped Service's frontends
// use, so they are not reported as leftovers.
func (m *nodeMode) noteFrontendPIPs(svc *v1.Service, base string) {
	for _, fes := range m.serviceFrontends(base) {
		for _, fe := range fes {
			if fe.Properties != nil && fe.Properties.PublicIPAddress != nil {
				m.referencedPIPs[lower(ptr.Deref(fe.Properties.PublicIPAddress.ID, ""))] = svc.Namespace + "/" + svc.Name
			}
		}
	}
}

// pickLB picks, among the load balancers holding a Service's frontends,
// the one of the right kind (public or internal) if there is one.
func (m *nodeMode) pickLB(lbNames []string, internal bool) string {
	for _, n := range lbNames {
		if names.IsInternalLB(n) == internal {
			return n
		}
	}
	return lbNames[0]
}

func frontendNames(svc *v1.Service, fams []v1.IPFamily) string {
	var out []string
	for _, f := range fams {
		out = append(out, names.Frontend(svc, f))
	}
	return strings.Join(out, ", ")
}

func famList(fams []v1.IPFamily) string {
	var out []string
	for _, f := range fams {
		out = append(out, string(f))
	}
	return strings.Join(out, ", ")
}

// checkPlacement: the load balancer's kind follows the internal annotation;
// in single mode it is the default load balancer (or its internal twin); in
// multiple-SLB mode one of the configurations the Service may be on
// (multiple-load-balancers.md, Service placement). Which eligible one is
// history, not checked.
func (m *nodeMode) checkPlacement(svc *v1.Service, spec *annotations.ServiceSpec, lbName string) {
	obj := serviceObject(svc)
	if names.IsInternalLB(lbName) != spec.Internal {
		kind := "public"
		if spec.Internal {
			kind = "internal"
		}
		m.r.add(obj, "load-balancers.md#what-azlb-creates", "is on load balancer %s, want an %s load balancer (%s)", lbName, kind, annotations.KeyInternal)
	}
	cfgName := names.PublicLB(lbName)
	if !m.multi {
		if !strings.EqualFold(cfgName, m.defaultLB) {
			m.r.add(obj, "load-balancers.md#what-azlb-creates", "is on load balancer %s, want %s", lbName, names.LoadBalancer(m.defaultLB, spec.Internal))
		}
		return
	}
	var conf *config.MultipleStandardLoadBalancerConfiguration
	for i := range m.cfg.MultipleStandardLoadBalancerConfigurations {
		if strings.EqualFold(m.cfg.MultipleStandardLoadBalancerConfigurations[i].Name, cfgName) {
			conf = &m.cfg.MultipleStandardLoadBalancerConfigurations[i]
		}
	}
	doc := "multiple-load-balancers.md#service-placement"
	if conf == nil {
		m.r.add(obj, "multiple-load-balancers.md#moves", "is on load balancer %s, which has no configuration: it should have moved to a configured one", lbName)
		return
	}
	misplaced := false
	if req := spec.LoadBalancerConfigurations; len(req) > 0 && !slices.ContainsFunc(req, func(n string) bool { return strings.EqualFold(n, conf.Name) }) {
		m.r.add(obj, doc, "is on load balancer %s, but %s names only %s", lbName, annotations.KeyLoadBalancerConfigurations, strings.Join(req, ", "))
		misplaced = true
	}
	if !selectorMatches(conf.ServiceNamespaceSelector, m.s.Namespaces[svc.Namespace]) {
		m.r.add(obj, doc, "is on load balancer %s, whose serviceNamespaceSelector does not match namespace %s", lbName, svc.Namespace)
		misplaced = true
	}
	if !selectorMatches(conf.ServiceLabelSelector, svc.Labels) {
		m.r.add(obj, doc, "is on load balancer %s, whose serviceLabelSelector does not match the Service's labels", lbName)
		misplaced = true
	}
	if misplaced || selects(conf) {
		return
	}
	// A load balancer whose selector matches comes first.
	for _, other := range m.cfg.MultipleStandardLoadBalancerConfigurations {
		if req := spec.LoadBalancerConfigurations; len(req) > 0 && !slices.ContainsFunc(req, func(n string) bool { return strings.EqualFold(n, other.Name) }) {
			continue
		}
		if selects(&other) && (other.AllowServicePlacement == nil || *other.AllowServicePlacement) &&
			selectorMatches(other.ServiceNamespaceSelector, m.s.Namespaces[svc.Namespace]) && selectorMatches(other.ServiceLabelSelector, svc.Labels) {
			m.r.add(obj, doc, "is on load balancer %s, which has no Service selector, but the selectors of %s match the Service: it belongs there", lbName, other.Name)
			return
		}
	}
}

// selects: the configuration has a Service selector (namespace or labels)
// that is not empty.
func selects(c *config.MultipleStandardLoadBalancerConfiguration) bool {
	nonEmpty := func(sel *metav1.LabelSelector) bool {
		return sel != nil && (len(sel.MatchLabels) > 0 || len(sel.MatchExpressions) > 0)
	}
	return nonEmpty(c.ServiceNamespaceSelector) || nonEmpty(c.ServiceLabelSelector)
}

// selectorMatches: an absent selector matches everything.
func selectorMatches(sel *metav1.LabelSelector, set map[string]string) bool {
	if sel == nil {
		return true
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return false
	}
	return s.Matches(labels.Set(set))
}

// requestedAddress is the address the Service asks for in the family:
// azure-load-balancer-ipv4/-ipv6, else spec.loadBalancerIP of that family.
func requestedAddress(svc *v1.Service, spec *annotations.ServiceSpec, fam v1.IPFamily) string {
	if fam == v1.IPv6Protocol && spec.IPv6.IsValid() {
		return spec.IPv6.String()
	}
	if fam == v1.IPv4Protocol && spec.IPv4.IsValid() {
		return spec.IPv4.String()
	}
	if ip, err := netip.ParseAddr(svc.Spec.LoadBalancerIP); err == nil && ip.Is4() == (fam == v1.IPv4Protocol) {
		return ip.String()
	}
	return ""
}

func canonical(s string) string {
	if ip, err := netip.ParseAddr(s); err == nil {
		return ip.String()
	}
	return s
}

// checkFrontend checks one frontend and returns its address.
func (m *nodeMode) checkFrontend(svc *v1.Service, spec *annotations.ServiceSpec, lbName string, fe *armnetwork.FrontendIPConfiguration, fam v1.IPFamily) string {
	obj := serviceObject(svc)
	feName := ptr.Deref(fe.Name, "")
	p := fe.Properties
	if p == nil {
		m.r.add(obj, "load-balancers.md#what-azlb-creates", "frontend %s on %s has no properties", feName, lbName)
		return ""
	}
	want := requestedAddress(svc, spec, fam)
	if spec.Internal {
		doc := "load-balancers.md#annotations"
		if p.PublicIPAddress != nil {
			m.r.add(obj, doc, "internal frontend %s on %s references public IP %s", feName, lbName, ptr.Deref(p.PublicIPAddress.ID, ""))
		}
		subnet := cmpOr(spec.InternalSubnet, m.cfg.SubnetName)
		if m.vnetID != "" && subnet != "" {
			if wantID := names.SubnetID(m.vnetID, subnet); p.Subnet == nil || !strings.EqualFold(ptr.Deref(p.Subnet.ID, ""), wantID) {
				got := ""
				if p.Subnet != nil {
					got = ptr.Deref(p.Subnet.ID, "")
				}
				m.r.add(obj, doc, "frontend %s on %s uses subnet %q, want %q", feName, lbName, got, wantID)
			}
		}
		if v := ptr.Deref(p.PrivateIPAddressVersion, armnetwork.IPVersionIPv4); !strings.EqualFold(string(v), ipVersion(fam)) {
			m.r.add(obj, "load-balancers.md#dual-stack", "frontend %s on %s is %s, want %s", feName, lbName, v, ipVersion(fam))
		}
		addr := canonical(ptr.Deref(p.PrivateIPAddress, ""))
		if want != "" && (addr != want || !strings.EqualFold(string(ptr.Deref(p.PrivateIPAllocationMethod, "")), "Static")) {
			m.r.add(obj, doc, "frontend %s on %s has private address %s (%s), want static %s", feName, lbName, addr,
				ptr.Deref(p.PrivateIPAllocationMethod, ""), want)
		}
		return addr
	}
	if p.PublicIPAddress == nil || p.PublicIPAddress.ID == nil {
		m.r.add(obj, "load-balancers.md#what-azlb-creates", "public frontend %s on %s references no public IP", feName, lbName)
		return ""
	}
	id := lower(*p.PublicIPAddress.ID)
	m.referencedPIPs[id] = svc.Namespace + "/" + svc.Name
	pip := m.pips[id]
	if pip == nil {
		m.r.add(obj, "load-balancers.md#public-ips-owned-and-user-owned", "frontend %s on %s references public IP %s, which does not exist in %s", feName, lbName, *p.PublicIPAddress.ID, m.cfg.ResourceGroup)
		return ""
	}
	return m.checkPublicIP(svc, spec, fam, feName, pip, want)
}

func ipVersion(fam v1.IPFamily) string {
	if fam == v1.IPv6Protocol {
		return "IPv6"
	}
	return "IPv4"
}

// checkPublicIP checks the public IP of a frontend (load-balancers.md,
// Public IPs) and returns its address.
func (m *nodeMode) checkPublicIP(svc *v1.Service, spec *annotations.ServiceSpec, fam v1.IPFamily, feName string, pip *armnetwork.PublicIPAddress, want string) string {
	obj := serviceObject(svc)
	doc := "load-balancers.md#public-ips-owned-and-user-owned"
	name := ptr.Deref(pip.Name, "")
	addr := ""
	if pip.Properties != nil {
		addr = canonical(ptr.Deref(pip.Properties.IPAddress, ""))
	}
	pipName := spec.PIPName
	if fam == v1.IPv6Protocol {
		pipName = spec.PIPNameIPv6
	}
	switch {
	case want != "":
		if addr != want {
			m.r.add(obj, doc, "frontend %s uses public IP %s (%s), want the public IP with address %s", feName, name, addr, want)
		}
	case pipName != "":
		if !strings.EqualFold(name, pipName) {
			m.r.add(obj, doc, "frontend %s uses public IP %s, want %s (annotation)", feName, name, pipName)
		}
	default:
		if wantName := names.PublicIP(m.cluster, svc, fam); !strings.EqualFold(name, wantName) {
			m.r.add(obj, "load-balancers.md#what-azlb-creates", "frontend %s uses public IP %s, want %s", feName, name, wantName)
		}
	}
	owned := m.ownedPIP(pip)
	if want == "" && pipName == "" && !owned {
		m.r.add(obj, "load-balancers.md#what-azlb-creates", "public IP %s lacks azlb's tags %s=%s/%s and %s=%s", name,
			names.TagServiceName, svc.Namespace, svc.Name, names.TagClusterName, m.cluster)
	}
	if owned {
		// A public IP the Service names (azure-pip-name, an address) may be
		// shared: the Service that created it is the one tagged, and the
		// Azure cloud provider lists every sharer, comma-separated
		// (load-balancers.md, Sharing an IP).
		v, _ := tagValue(pip.Tags, names.TagServiceName)
		if !slices.Contains(strings.Split(strings.ReplaceAll(v, " ", ""), ","), svc.Namespace+"/"+svc.Name) && want == "" && pipName == "" {
			m.r.add(obj, doc, "public IP %s is tagged %s=%s, want %s/%s", name, names.TagServiceName, v, svc.Namespace, svc.Name)
		}
		if pip.SKU == nil || !strings.EqualFold(string(ptr.Deref(pip.SKU.Name, "")), "Standard") {
			m.r.add(obj, "load-balancers.md#what-azlb-creates", "public IP %s is not of SKU Standard", name)
		}
		m.checkReplacement(svc, spec, fam, pip)
		if pip.Properties != nil {
			if a := ptr.Deref(pip.Properties.PublicIPAllocationMethod, ""); !strings.EqualFold(string(a), "Static") {
				m.r.add(obj, "load-balancers.md#what-azlb-creates", "public IP %s is allocated %s, want Static", name, a)
			}
			if v := ptr.Deref(pip.Properties.PublicIPAddressVersion, armnetwork.IPVersionIPv4); !strings.EqualFold(string(v), ipVersion(fam)) {
				m.r.add(obj, "load-balancers.md#dual-stack", "public IP %s is %s, want %s", name, v, ipVersion(fam))
			}
			if spec.DNSLabelName != "" && fam == v1.IPv4Protocol {
				got := ""
				if pip.Properties.DNSSettings != nil {
					got = ptr.Deref(pip.Properties.DNSSettings.DomainNameLabel, "")
				}
				if got != spec.DNSLabelName {
					m.r.add(obj, "load-balancers.md#annotations", "public IP %s has DNS label %q, want %q (%s)", name, got, spec.DNSLabelName, annotations.KeyDNSLabelName)
				}
			}
		}
	}
	if addr == "" {
		m.r.add(obj, "load-balancers.md#what-azlb-creates", "public IP %s has no address", name)
	}
	return addr
}

// ownedPIP: azlb's two tags, with this cluster's name (load-balancers.md).
func (m *nodeMode) ownedPIP(pip *armnetwork.PublicIPAddress) bool {
	c, ok := tagValue(pip.Tags, names.TagClusterName)
	_, ok2 := tagValue(pip.Tags, names.TagServiceName)
	return ok && ok2 && strings.EqualFold(c, m.cluster)
}

func ingressIPs(svc *v1.Service) []string {
	var out []string
	for _, in := range svc.Status.LoadBalancer.Ingress {
		if in.IP != "" {
			out = append(out, canonical(in.IP))
		}
	}
	sort.Strings(out)
	return out
}

// checkIngress: the Service's status lists exactly its frontends'
// addresses (load-balancers.md, step 7).
func (m *nodeMode) checkIngress(svc *v1.Service, addrs []string) {
	var want []string
	for _, a := range addrs {
		if a != "" {
			want = append(want, a)
		}
	}
	sort.Strings(want)
	if got := ingressIPs(svc); !slices.Equal(got, want) {
		m.r.add(serviceObject(svc), "load-balancers.md#how-a-reconcile-works", "status.loadBalancer.ingress is %v, want its frontends' addresses %v", got, want)
	}
}

// checkPublicIPs: a public IP azlb owns is used by a frontend of the
// Service its tag names; otherwise it should have been deleted
// (load-balancers.md, Public IPs).
func (m *nodeMode) checkPublicIPs() {
	for _, pip := range m.s.PublicIPs {
		if !m.ownedPIP(pip) || pip.ID == nil {
			continue
		}
		tag, _ := tagValue(pip.Tags, names.TagServiceName)
		used := m.referencedPIPs[lower(*pip.ID)]
		if used == "" {
			m.r.add("public IP "+ptr.Deref(pip.Name, ""), "load-balancers.md#public-ips-owned-and-user-owned",
				"azlb owns it (%s=%s) but no frontend of that Service uses it: it should have been deleted", names.TagServiceName, tag)
		}
	}
}

// refusedPorts says why azlb refuses a Service for its ports, or "": a
// protocol Azure's rules do not carry, or a rule with floating IP off and
// no node port to send to (allocateLoadBalancerNodePorts false;
// load-balancers.md, Services without node ports). The HA ports rule
// carries every protocol to any port.
func refusedPorts(svc *v1.Service, spec *annotations.ServiceSpec) string {
	if spec.HAPorts {
		return ""
	}
	for _, p := range svc.Spec.Ports {
		if p.Protocol != v1.ProtocolTCP && p.Protocol != v1.ProtocolUDP && p.Protocol != "" {
			return fmt.Sprintf("refused (UnsupportedProtocol): port %d has protocol %s, which Azure Load Balancer rules do not carry (TCP or UDP)", p.Port, p.Protocol)
		}
	}
	for _, p := range svc.Spec.Ports {
		if p.NodePort != 0 || spec.Ports[p.Port].NoLBRule {
			continue
		}
		for _, fam := range families(svc) {
			if !portFloatingIP(spec, fam) {
				return fmt.Sprintf("refused (MissingNodePort): port %d has no node port (allocateLoadBalancerNodePorts is false) and its rule has floating IP off", p.Port)
			}
		}
	}
	return ""
}
