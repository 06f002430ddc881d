package verify

import (
	"fmt"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/azlb/azlb/internal/annotations"
	"github.com/azlb/azlb/internal/names"
	"github.com/azlb/azlb/internal/privatelink"
)

// wantRule is a load-balancing rule as docs/load-balancers.md describes it.
type wantRule struct {
	name       string
	protocol   string
	feport     int32
	beport     int32
	floating   bool
	tcpReset   *bool  // nil: not checked (UDP)
	idle       *int32 // nil: not checked (UDP)
	frontend   string
	pool       string
	probe      string // "" when the rule has no probe
	disableSNA bool
	// distribution is the loadDistribution: SourceIP for sessionAffinity
	// ClientIP, Default otherwise.
	distribution string
}

// wantProbe is a health probe as docs/load-balancers.md describes it.
type wantProbe struct {
	name     string
	protocol string
	port     int32
	path     string
	interval int32
	num      int32
}

// Defaults of docs/load-balancers.md (Annotations).
const (
	defaultProbeInterval = 5
	defaultProbeCount    = 2
	defaultIdleTimeout   = 4 // Azure's default, when no annotation sets it
	localProbePath       = "/healthz"
	defaultProbePath     = "/"
	defaultDistribution  = "Default"  // Azure's default; sessionAffinity None
	clientIPDistribution = "SourceIP" // sessionAffinity ClientIP
)

// distributionOf is the documented loadDistribution of a Service's rules.
func distributionOf(svc *v1.Service) string {
	if svc.Spec.SessionAffinity == v1.ServiceAffinityClientIP {
		return clientIPDistribution
	}
	return defaultDistribution
}

// appProtocolProbe is the probe protocol the documentation derives from a
// port's appProtocol ("" when it derives none).
func appProtocolProbe(port v1.ServicePort) string {
	switch strings.ToLower(strings.TrimSpace(ptr.Deref(port.AppProtocol, ""))) {
	case "http":
		return "Http"
	case "https":
		return "Https"
	}
	return ""
}

// probePath is an Http(s) probe's documented path: per-port, then
// Service-wide, then the Local default while it targets
// healthCheckNodePort, then "/".
func probePath(spec *annotations.ServiceSpec, ov annotations.PortOverrides, localPort bool) string {
	switch {
	case ov.Probe.RequestPath != "":
		return ov.Probe.RequestPath
	case spec.Probe.RequestPath != "":
		return spec.Probe.RequestPath
	case localPort:
		return localProbePath
	default:
		return defaultProbePath
	}
}

// probeFor resolves the probe of one Service port, field by field: the
// per-port annotation, then the service-wide one, then the default (Tcp on
// the port's NodePort, Http/Https for an appProtocol of http/https; for
// Local Services Http on healthCheckNodePort at /healthz whatever the
// protocol or appProtocol). A health-probe_port naming a Service port (by
// number or name) probes that port's NodePort; another number is probed as
// is. The Local default path applies while the probe targets
// healthCheckNodePort. With clusterServiceLoadBalancerHealthProbeMode
// shared, Cluster Services use the one shared probe instead, UDP ports
// too. Otherwise a UDP or SCTP port of a Cluster Service has no probe
// unless its own port_{port}_health-probe_protocol or
// port_{port}_health-probe_port asks for one. nil: no probe.
func (m *nodeMode) probeFor(svc *v1.Service, spec *annotations.ServiceSpec, port v1.ServicePort, rule string, fam v1.IPFamily) *wantProbe {
	ov := spec.Ports[port.Port]
	if ov.NoProbeRule || ov.NoLBRule {
		return nil
	}
	local := isLocal(svc)
	// A Local Service's ports without a probe port of their own share one
	// probe of healthCheckNodePort per frontend, with the service-wide
	// settings only (load-balancers.md, Health probes).
	healthCheck := local && ov.Probe.Port == nil
	if healthCheck {
		ov.Probe = annotations.ProbeOverrides{}
	}
	if strings.EqualFold(m.cfg.ClusterServiceLoadBalancerHealthProbeMode, "shared") && !local {
		return &wantProbe{name: names.SharedProbe, protocol: "Http", port: m.cfg.ClusterServiceSharedLoadBalancerHealthProbePort,
			path: m.cfg.ClusterServiceSharedLoadBalancerHealthProbePath, interval: defaultProbeInterval, num: defaultProbeCount}
	}
	proto := port.Protocol
	if proto == "" {
		proto = v1.ProtocolTCP
	}
	if !local && proto != v1.ProtocolTCP && ov.Probe.Protocol == "" && ov.Probe.Port == nil {
		return nil // Azure has no UDP probe: the rule goes without one
	}
	p := &wantProbe{name: rule, protocol: "Tcp", port: port.NodePort, interval: defaultProbeInterval, num: defaultProbeCount}
	localPort := false
	if local {
		p.protocol, p.port, localPort = "Http", svc.Spec.HealthCheckNodePort, true
	} else if app := appProtocolProbe(port); app != "" {
		p.protocol = app
	}
	switch {
	case ov.Probe.Protocol != "":
		p.protocol = string(ov.Probe.Protocol)
	case spec.Probe.Protocol != "":
		p.protocol = string(spec.Probe.Protocol)
	}
	if ref := ov.Probe.Port; ref != nil {
		p.port, localPort = probePortOf(svc, *ref), false
	}
	if local && p.port == svc.Spec.HealthCheckNodePort && privatelink.ProxyProtocolRequested(svc.Annotations) {
		// Proxy protocol: Azure's probes carry the PROXY header, which
		// the health check node port refuses (private-link.md).
		if proto != v1.ProtocolTCP {
			return nil
		}
		p.protocol, p.port, localPort = "Tcp", port.NodePort, false
	}
	if !strings.EqualFold(p.protocol, "Tcp") {
		p.path = probePath(spec, ov, localPort)
	}
	p.interval = firstSet(ov.Probe.IntervalInSeconds, spec.Probe.IntervalInSeconds, p.interval)
	p.num = firstSet(ov.Probe.NumberOfProbes, spec.Probe.NumberOfProbes, p.num)
	if p.port == 0 {
		return nil // no node port allocated yet: the rule waits for its probe
	}
	if healthCheck && p.port == svc.Spec.HealthCheckNodePort {
		p.name = names.HealthCheckProbe(svc, fam)
	}
	return p
}

// probePortOf is the port a health-probe_port value probes: the NodePort of
// the Service port it names (by name or number), else the number as is.
func probePortOf(svc *v1.Service, ref annotations.ProbePortRef) int32 {
	for _, sp := range svc.Spec.Ports {
		if (ref.Name != "" && sp.Name == ref.Name) || (ref.Name == "" && sp.Port == ref.Number) {
			return sp.NodePort
		}
	}
	return ref.Number
}

// firstSet is the per-port value, else the service-wide one, else def.
func firstSet(perPort, serviceWide *int32, def int32) int32 {
	switch {
	case perPort != nil:
		return *perPort
	case serviceWide != nil:
		return *serviceWide
	}
	return def
}

// portFloatingIP is the documented floating IP of a Service port's rule
// (load-balancers.md, Dual-stack): the Service's setting, except on an
// internal load balancer's IPv6 frontend, where Azure does not carry
// floating IP: those rules have it off and send to the NodePort. The HA
// ports rule is not a port's rule and keeps the Service's setting.
func portFloatingIP(spec *annotations.ServiceSpec, fam v1.IPFamily) bool {
	if spec.Internal && fam == v1.IPv6Protocol {
		return false
	}
	return spec.EnableFloatingIP
}

// wantRules lists the Service's rules and per-port probes of one family.
func (m *nodeMode) wantRules(svc *v1.Service, spec *annotations.ServiceSpec, fam v1.IPFamily) ([]wantRule, []*wantProbe) {
	fe := names.Frontend(svc, fam)
	pool := names.ClusterPool(m.cluster, fam)
	if m.multi && isLocal(svc) {
		pool = names.LocalServicePool(svc.Namespace, svc.Name, fam)
	}
	idle := spec.TCPIdleTimeoutMinutes
	if idle == nil {
		idle = ptr.To[int32](defaultIdleTimeout)
	}
	snat := !spec.Internal && m.cfg.DisableOutboundSNAT != nil && *m.cfg.DisableOutboundSNAT
	var rules []wantRule
	var probes []*wantProbe
	addProbe := func(p *wantProbe) string {
		if p == nil {
			return ""
		}
		for _, q := range probes {
			if strings.EqualFold(q.name, p.name) {
				return p.name
			}
		}
		probes = append(probes, p)
		return p.name
	}
	if spec.HAPorts {
		name := names.HARule(svc, fam)
		r := wantRule{name: name, protocol: "All", floating: spec.EnableFloatingIP, tcpReset: ptr.To(spec.EnableTCPReset), idle: idle,
			frontend: fe, pool: pool, disableSNA: snat, distribution: distributionOf(svc)}
		if len(svc.Spec.Ports) > 0 {
			r.probe = addProbe(m.probeFor(svc, spec, svc.Spec.Ports[0], name, fam))
		}
		return append(rules, r), probes
	}
	for _, port := range svc.Spec.Ports {
		if spec.Ports[port.Port].NoLBRule {
			continue
		}
		proto := port.Protocol
		if proto == "" {
			proto = v1.ProtocolTCP
		}
		name := names.Rule(svc, proto, port.Port, fam)
		floating := portFloatingIP(spec, fam)
		r := wantRule{name: name, protocol: string(proto), feport: port.Port, beport: port.Port, floating: floating,
			frontend: fe, pool: pool, disableSNA: snat, distribution: distributionOf(svc)}
		if !floating {
			r.beport = port.NodePort
		}
		if proto == v1.ProtocolTCP {
			r.tcpReset, r.idle = ptr.To(spec.EnableTCPReset), idle
		}
		if !spec.Ports[port.Port].NoProbeRule {
			r.probe = addProbe(m.probeFor(svc, spec, port, name, fam))
		}
		rules = append(rules, r)
	}
	return rules, probes
}

// checkRulesAndProbes compares the Service's rules and probes on its load
// balancer with wantRules: each wanted one present and equal, no other one
// owned by the Service.
//
// feOf names the frontend each family uses when it is not the Service's
// own (a shared IP).
func (m *nodeMode) checkRulesAndProbes(svc *v1.Service, spec *annotations.ServiceSpec, lb *armnetwork.LoadBalancer, fams []v1.IPFamily, feOf map[v1.IPFamily]string) {
	obj := serviceObject(svc)
	lbName := ptr.Deref(lb.Name, "")
	base := names.FrontendBase(svc)
	wantR := map[string]wantRule{}
	wantP := map[string]*wantProbe{}
	for _, fam := range fams {
		rules, probes := m.wantRules(svc, spec, fam)
		for _, r := range rules {
			if fe := feOf[fam]; fe != "" {
				r.frontend = fe
			}
			wantR[lower(r.name)] = r
		}
		for _, p := range probes {
			wantP[lower(p.name)] = p
		}
	}
	doc := "load-balancers.md#annotations"
	compareRules(m.r, obj, lbName, rulesOf(lb), wantR, func(name string) bool { return names.Owns(base, name) },
		ruleDocs{extra: "load-balancers.md#what-azlb-creates", diff: doc, caller: "port of the Service"})
	seen := map[string]bool{}
	for _, p := range probesOf(lb) {
		name := ptr.Deref(p.Name, "")
		w, ok := wantP[lower(name)]
		if !ok {
			if names.Owns(base, name) {
				m.r.add(obj, "load-balancers.md#what-azlb-creates", "load balancer %s has probe %s, which no rule of the Service calls for", lbName, name)
			}
			continue
		}
		seen[lower(name)] = true
		for _, d := range diffProbe(p, w) {
			m.r.add(obj, doc, "probe %s on %s: %s", name, lbName, d)
		}
	}
	for k, w := range wantP {
		if !seen[k] {
			m.r.add(obj, "load-balancers.md#what-azlb-creates", "load balancer %s has no probe %s", lbName, w.name)
		}
	}
}

func diffRule(r *armnetwork.LoadBalancingRule, w wantRule, lbName string) []string {
	p := r.Properties
	if p == nil {
		return []string{"no properties"}
	}
	var out []string
	add := func(field string, got, want any) {
		if fmt.Sprint(got) != fmt.Sprint(want) {
			out = append(out, fmt.Sprintf("%s %v, want %v", field, got, want))
		}
	}
	if got := string(ptr.Deref(p.Protocol, "")); !strings.EqualFold(got, w.protocol) {
		out = append(out, fmt.Sprintf("protocol %s, want %s", got, w.protocol))
	}
	add("frontendPort", ptr.Deref(p.FrontendPort, -1), w.feport)
	add("backendPort", ptr.Deref(p.BackendPort, -1), w.beport)
	add("enableFloatingIP", ptr.Deref(p.EnableFloatingIP, false), w.floating)
	if w.tcpReset != nil {
		add("enableTcpReset", ptr.Deref(p.EnableTCPReset, false), *w.tcpReset)
	}
	if w.idle != nil {
		add("idleTimeoutInMinutes", ptr.Deref(p.IdleTimeoutInMinutes, defaultIdleTimeout), *w.idle)
	}
	add("disableOutboundSnat", ptr.Deref(p.DisableOutboundSnat, false), w.disableSNA)
	if w.distribution != "" {
		if got := string(ptr.Deref(p.LoadDistribution, defaultDistribution)); !strings.EqualFold(got, w.distribution) {
			out = append(out, fmt.Sprintf("loadDistribution %s, want %s", got, w.distribution))
		}
	}
	add("frontend", childName(p.FrontendIPConfiguration), lower(w.frontend))
	pool := childName(p.BackendAddressPool)
	add("backend pool", pool, lower(w.pool))
	if p.BackendAddressPool != nil && !strings.EqualFold(parentLB(ptr.Deref(p.BackendAddressPool.ID, "")), lbName) {
		out = append(out, fmt.Sprintf("backend pool %s is on another load balancer", ptr.Deref(p.BackendAddressPool.ID, "")))
	}
	add("probe", childName(p.Probe), lower(w.probe))
	return out
}

func diffProbe(p *armnetwork.Probe, w *wantProbe) []string {
	pp := p.Properties
	if pp == nil {
		return []string{"no properties"}
	}
	var out []string
	if got := string(ptr.Deref(pp.Protocol, "")); !strings.EqualFold(got, w.protocol) {
		out = append(out, fmt.Sprintf("protocol %s, want %s", got, w.protocol))
	}
	if got := ptr.Deref(pp.Port, -1); got != w.port {
		out = append(out, fmt.Sprintf("port %d, want %d", got, w.port))
	}
	if got := ptr.Deref(pp.RequestPath, ""); got != w.path {
		out = append(out, fmt.Sprintf("requestPath %q, want %q", got, w.path))
	}
	if got := ptr.Deref(pp.IntervalInSeconds, defaultProbeInterval); got != w.interval {
		out = append(out, fmt.Sprintf("intervalInSeconds %d, want %d", got, w.interval))
	}
	if got := ptr.Deref(pp.NumberOfProbes, defaultProbeCount); got != w.num {
		out = append(out, fmt.Sprintf("numberOfProbes %d, want %d", got, w.num))
	}
	return out
}

// ruleDocs are the documentation anchors of compareRules' findings: a rule
// too many or missing (extra), a rule that differs (diff); caller names
// what calls for a rule in the findings ("port").
type ruleDocs struct{ extra, diff, caller string }

// compareRules reports, on obj, the rules of the load balancer (those keep
// selects; nil: all) that nothing in want calls for, the wanted ones that
// are missing, and how each present one differs from what is wanted (want
// is keyed by lower-cased rule name).
func compareRules(r *Report, obj, lbName string, rules []*armnetwork.LoadBalancingRule, want map[string]wantRule, keep func(string) bool, docs ruleDocs) {
	seen := map[string]bool{}
	for _, rule := range rules {
		name := ptr.Deref(rule.Name, "")
		if keep != nil && !keep(name) {
			continue
		}
		w, ok := want[lower(name)]
		if !ok {
			r.add(obj, docs.extra, "load balancer %s has rule %s, which no %s calls for", lbName, name, docs.caller)
			continue
		}
		seen[lower(name)] = true
		for _, d := range diffRule(rule, w, lbName) {
			r.add(obj, docs.diff, "rule %s on %s: %s", name, lbName, d)
		}
	}
	for k, w := range want {
		if !seen[k] {
			r.add(obj, docs.extra, "load balancer %s has no rule %s", lbName, w.name)
		}
	}
}
