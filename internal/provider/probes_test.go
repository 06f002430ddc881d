package provider

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/azlb/azlb/internal/annotations"
	"github.com/azlb/azlb/internal/config"
	"github.com/azlb/azlb/internal/devenv"
	"github.com/azlb/azlb/internal/names"
	"github.com/azlb/azlb/internal/testutil"
	"github.com/azlb/azlb/internal/verify"
)

// udpService is a Service with TCP/80 and UDP/53 (node ports 30080, 30053).
func udpService(ann map[string]string) *v1.Service {
	svc := testService("dns", "12121212-0000-0000-0000-000000000027", ann, 80)
	svc.Spec.Ports = append(svc.Spec.Ports, v1.ServicePort{Name: "dns", Port: 53, Protocol: v1.ProtocolUDP, NodePort: 30053})
	return svc
}

// ruleProbe returns the probe of the rule (nil: none), looked up in st.
func ruleProbe(t *testing.T, st *serviceLBState, rule string) *armnetwork.Probe {
	t.Helper()
	for _, r := range st.rules {
		if !strings.EqualFold(*r.Name, rule) {
			continue
		}
		if r.Properties.Probe == nil {
			return nil
		}
		id := *r.Properties.Probe.ID
		if st.sharedProbe != nil && strings.HasSuffix(id, "/probes/"+names.SharedProbe) {
			return st.sharedProbe
		}
		for _, p := range st.probes {
			if strings.HasSuffix(id, "/probes/"+*p.Name) {
				return p
			}
		}
		t.Fatalf("rule %s references probe %s, which the state does not hold", rule, id)
	}
	t.Fatalf("no rule %s", rule)
	return nil
}

// probeString is "Protocol:port:path", or "none".
func probeString(p *armnetwork.Probe) string {
	if p == nil {
		return "none"
	}
	return fmt.Sprintf("%s:%d:%s", *p.Properties.Protocol, *p.Properties.Port, ptr.Deref(p.Properties.RequestPath, ""))
}

// Issue 27: UDP ports of Cluster Services get no per-port probe (Azure has
// none for UDP, and a Tcp probe on a UDP NodePort takes every backend down);
// appProtocol http/https chooses an Http(s) probe.
func TestRuleProbesByProtocol(t *testing.T) {
	tcpRule := func(svc *v1.Service) string { return names.Rule(svc, v1.ProtocolTCP, 80, v1.IPv4Protocol) }
	udpRule := func(svc *v1.Service) string { return names.Rule(svc, v1.ProtocolUDP, 53, v1.IPv4Protocol) }
	tests := []struct {
		name     string
		ann      map[string]string
		mutate   func(*v1.Service)
		shared   bool
		tcp, udp string // probeString of each rule's probe
		probes   int    // probes the Service owns (not the shared one)
	}{
		{name: "Cluster: TCP probed on its NodePort, UDP not probed",
			tcp: "Tcp:30080:", udp: "none", probes: 1},
		{name: "Cluster, shared probe mode: both use the shared probe", shared: true,
			tcp: "Http:10256:/healthz", udp: "Http:10256:/healthz", probes: 0},
		{name: "Local: both use the health-check probe", mutate: func(s *v1.Service) {
			s.Spec.ExternalTrafficPolicy, s.Spec.HealthCheckNodePort = v1.ServiceExternalTrafficPolicyLocal, 32000
		}, tcp: "Http:32000:/healthz", udp: "Http:32000:/healthz", probes: 1},
		{name: "Local, shared probe mode: the health-check probe stays", shared: true, mutate: func(s *v1.Service) {
			s.Spec.ExternalTrafficPolicy, s.Spec.HealthCheckNodePort = v1.ServiceExternalTrafficPolicyLocal, 32000
		}, tcp: "Http:32000:/healthz", udp: "Http:32000:/healthz", probes: 1},
		{name: "Cluster: a service-wide probe protocol does not probe the UDP port",
			ann: map[string]string{annotations.KeyProbeProtocol: "Http"},
			tcp: "Http:30080:/", udp: "none", probes: 1},
		{name: "Cluster: a per-port probe protocol for the UDP port is honoured",
			ann: map[string]string{annotations.PortKey(53, annotations.PortSuffixProbeProtocol): "Tcp"},
			tcp: "Tcp:30080:", udp: "Tcp:30053:", probes: 2},
		{name: "Cluster: a per-port probe port for the UDP port is honoured",
			ann: map[string]string{annotations.PortKey(53, annotations.PortSuffixProbePort): "80"},
			tcp: "Tcp:30080:", udp: "Tcp:30080:", probes: 2},
		{name: "appProtocol http: Http probe at /", mutate: func(s *v1.Service) { s.Spec.Ports[0].AppProtocol = ptr.To("HTTP") },
			tcp: "Http:30080:/", udp: "none", probes: 1},
		{name: "appProtocol https with a request path annotation",
			ann:    map[string]string{annotations.KeyProbeRequestPath: "/ready"},
			mutate: func(s *v1.Service) { s.Spec.Ports[0].AppProtocol = ptr.To("https") },
			tcp:    "Https:30080:/ready", udp: "none", probes: 1},
		{name: "appProtocol https: an explicit probe protocol wins",
			ann:    map[string]string{annotations.PortKey(80, annotations.PortSuffixProbeProtocol): "Tcp"},
			mutate: func(s *v1.Service) { s.Spec.Ports[0].AppProtocol = ptr.To("https") },
			tcp:    "Tcp:30080:", udp: "none", probes: 1},
		{name: "appProtocol on a Local Service: the health-check probe stays", mutate: func(s *v1.Service) {
			s.Spec.ExternalTrafficPolicy, s.Spec.HealthCheckNodePort = v1.ServiceExternalTrafficPolicyLocal, 32000
			s.Spec.Ports[0].AppProtocol = ptr.To("https")
		}, tcp: "Http:32000:/healthz", udp: "Http:32000:/healthz", probes: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			svc := udpService(tc.ann)
			if tc.mutate != nil {
				tc.mutate(svc)
			}
			st := stateFor(t, svc, tc.shared)
			if got := probeString(ruleProbe(t, st, tcpRule(svc))); got != tc.tcp {
				t.Errorf("TCP rule probe %s, want %s", got, tc.tcp)
			}
			if got := probeString(ruleProbe(t, st, udpRule(svc))); got != tc.udp {
				t.Errorf("UDP rule probe %s, want %s", got, tc.udp)
			}
			if len(st.probes) != tc.probes {
				t.Errorf("%d per-port probes, want %d", len(st.probes), tc.probes)
			}
		})
	}
}

// An HA-ports rule takes the probe of the first Service port: none when that
// is a UDP port of a Cluster Service.
func TestHAPortsRuleProbeFollowsTheFirstPort(t *testing.T) {
	ann := map[string]string{annotations.KeyInternal: "true", annotations.KeyHAPorts: "true"}
	svc := udpService(ann)
	svc.Spec.Ports[0], svc.Spec.Ports[1] = svc.Spec.Ports[1], svc.Spec.Ports[0]
	st := stateFor(t, svc, false)
	if got := probeString(ruleProbe(t, st, names.HARule(svc, v1.IPv4Protocol))); got != "none" {
		t.Errorf("HA rule probe %s, want none (first port is UDP)", got)
	}
	svc = udpService(ann)
	st = stateFor(t, svc, false)
	if got := probeString(ruleProbe(t, st, names.HARule(svc, v1.IPv4Protocol))); got != "Tcp:30080:" {
		t.Errorf("HA rule probe %s, want Tcp:30080:", got)
	}
}

// Issue 27: sessionAffinity ClientIP maps to loadDistribution SourceIP, on
// every rule (HA ports included); anything else to Default.
func TestLoadDistributionFollowsSessionAffinity(t *testing.T) {
	for _, tc := range []struct {
		affinity v1.ServiceAffinity
		ha       bool
		want     armnetwork.LoadDistribution
	}{
		{"", false, armnetwork.LoadDistributionDefault},
		{v1.ServiceAffinityNone, false, armnetwork.LoadDistributionDefault},
		{v1.ServiceAffinityClientIP, false, armnetwork.LoadDistributionSourceIP},
		{v1.ServiceAffinityClientIP, true, armnetwork.LoadDistributionSourceIP},
		{v1.ServiceAffinityNone, true, armnetwork.LoadDistributionDefault},
	} {
		t.Run(fmt.Sprintf("%s/ha=%v", tc.affinity, tc.ha), func(t *testing.T) {
			var ann map[string]string
			if tc.ha {
				ann = map[string]string{annotations.KeyInternal: "true", annotations.KeyHAPorts: "true"}
			}
			svc := udpService(ann)
			svc.Spec.SessionAffinity = tc.affinity
			st := stateFor(t, svc, false)
			for _, r := range st.rules {
				if got := ptr.Deref(r.Properties.LoadDistribution, ""); got != tc.want {
					t.Errorf("rule %s loadDistribution %s, want %s", *r.Name, got, tc.want)
				}
			}
		})
	}
}

// A change of distribution is a change of the rule (written in place); an
// unset distribution as read back is Azure's Default.
func TestRuleEqualComparesLoadDistribution(t *testing.T) {
	svc := testService("web", "11111111-2222-3333-4444-555555555555", nil, 80)
	def := stateFor(t, svc, false).rules[0]
	svc.Spec.SessionAffinity = v1.ServiceAffinityClientIP
	src := stateFor(t, svc, false).rules[0]
	if ruleEqual(def, src) {
		t.Error("Default and SourceIP rules compare equal: a sessionAffinity change would not be written")
	}
	unset := *def
	props := *def.Properties
	props.LoadDistribution = nil
	unset.Properties = &props
	if !ruleEqual(&unset, def) {
		t.Error("an unset loadDistribution differs from Default: resyncs would write")
	}
	lower := *src
	p2 := *src.Properties
	p2.LoadDistribution = to.Ptr(armnetwork.LoadDistribution("sourceip"))
	lower.Properties = &p2
	if !ruleEqual(&lower, src) {
		t.Error("loadDistribution compared case-sensitively")
	}
}

// Against the emulator: the UDP rule is written without a probe, a
// sessionAffinity change rewrites the rules in place (same names, same
// address) with one write, and a resync writes nothing.
func TestUDPAndSessionAffinityAgainstEmulator(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()
	svc := udpService(nil)
	nodes := []*v1.Node{testNode("n1", "10.240.0.4"), testNode("n2", "10.240.0.5")}
	st, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", svc, nodes)
	if err != nil {
		t.Fatalf("EnsureLoadBalancer: %v", err)
	}
	lb := h.lb(t, "kubernetes")
	udp := names.Rule(svc, v1.ProtocolUDP, 53, v1.IPv4Protocol)
	tcp := names.Rule(svc, v1.ProtocolTCP, 80, v1.IPv4Protocol)
	rules := map[string]*armnetwork.LoadBalancingRule{}
	for _, r := range lb.Properties.LoadBalancingRules {
		rules[*r.Name] = r
	}
	if r := rules[udp]; r == nil || r.Properties.Probe != nil {
		t.Fatalf("UDP rule %+v, want one without a probe", r)
	}
	if r := rules[tcp]; r == nil || r.Properties.Probe == nil {
		t.Fatalf("TCP rule %+v, want one with a probe", r)
	}
	if len(lb.Properties.Probes) != 1 || *lb.Properties.Probes[0].Name != tcp {
		t.Fatalf("probes %d, want exactly %s", len(lb.Properties.Probes), tcp)
	}
	for _, r := range lb.Properties.LoadBalancingRules {
		if got := ptr.Deref(r.Properties.LoadDistribution, ""); got != armnetwork.LoadDistributionDefault {
			t.Errorf("rule %s loadDistribution %s, want Default", *r.Name, got)
		}
	}

	h.env.Emulator().ResetRequests()
	if _, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", svc, nodes); err != nil {
		t.Fatal(err)
	}
	if w := h.writes(); w != 0 {
		t.Fatalf("resync made %d ARM writes, want 0", w)
	}

	affine := svc.DeepCopy()
	affine.Spec.SessionAffinity = v1.ServiceAffinityClientIP
	h.env.Emulator().ResetRequests()
	st2, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", affine, nodes)
	if err != nil {
		t.Fatalf("EnsureLoadBalancer with ClientIP: %v", err)
	}
	if w := h.writes(); w != 1 {
		t.Errorf("sessionAffinity change made %d ARM writes, want 1 (the load balancer)", w)
	}
	if st2.Ingress[0].IP != st.Ingress[0].IP {
		t.Errorf("address changed %s -> %s", st.Ingress[0].IP, st2.Ingress[0].IP)
	}
	lb = h.lb(t, "kubernetes")
	if len(lb.Properties.LoadBalancingRules) != 2 {
		t.Fatalf("%d rules, want 2", len(lb.Properties.LoadBalancingRules))
	}
	for _, r := range lb.Properties.LoadBalancingRules {
		if *r.Name != udp && *r.Name != tcp {
			t.Errorf("unexpected rule %s", *r.Name)
		}
		if got := ptr.Deref(r.Properties.LoadDistribution, ""); got != armnetwork.LoadDistributionSourceIP {
			t.Errorf("rule %s loadDistribution %s, want SourceIP", *r.Name, got)
		}
	}
	h.env.Emulator().ResetRequests()
	if _, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", affine, nodes); err != nil {
		t.Fatal(err)
	}
	if w := h.writes(); w != 0 {
		t.Fatalf("resync with ClientIP made %d ARM writes, want 0", w)
	}
}

// Issue 27: annotations azlb does not implement are a Warning event
// UnsupportedAnnotation naming them, once per Service generation and set of
// keys, not on every resync; forgotten when the Service is deleted.
func TestUnsupportedAnnotationsAreAWarningEventOnce(t *testing.T) {
	h := newHarness(t, nil)
	events := &testutil.EventLog{}
	h.p = newProvider(t, h.env.Config, h.clients, events)
	ctx := context.Background()
	nodes := []*v1.Node{testNode("n1", "10.240.0.4")}
	const (
		unknown = annotations.Prefix + "azure-load-balancer-mixed-protocols"
		port    = annotations.Prefix + "port_80_health-probe_unknown"
	)
	svc := testService("web", "13131313-0000-0000-0000-000000000027", map[string]string{
		unknown: "true", port: "x", annotations.KeyTCPIdleTimeout: "10", "example.com/other": "y",
	}, 80)
	svc.Generation = 1
	ensure := func(s *v1.Service) {
		t.Helper()
		if _, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", s, nodes); err != nil {
			t.Fatalf("EnsureLoadBalancer: %v", err)
		}
	}
	count := func() int { return len(events.Find("default/web", EventReasonUnsupportedAnnotation)) }

	ensure(svc)
	got := events.Find("default/web", EventReasonUnsupportedAnnotation)
	if len(got) != 1 || got[0].Type != v1.EventTypeWarning {
		t.Fatalf("events %v, want one Warning %s", got, EventReasonUnsupportedAnnotation)
	}
	msg := got[0].Message
	if !strings.Contains(msg, unknown) || !strings.Contains(msg, port) {
		t.Errorf("message %q does not name both unsupported keys", msg)
	}
	if strings.Contains(msg, annotations.KeyTCPIdleTimeout) || strings.Contains(msg, "example.com") {
		t.Errorf("message %q names a supported or foreign key", msg)
	}

	ensure(svc) // a resync
	if err := h.p.UpdateLoadBalancer(ctx, "kubernetes", svc, nodes); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != 1 {
		t.Fatalf("%d events after resyncs, want still 1", n)
	}

	next := svc.DeepCopy()
	next.Generation = 2 // the Service was changed
	ensure(next)
	if n := count(); n != 2 {
		t.Fatalf("%d events after a new generation, want 2", n)
	}

	fewer := next.DeepCopy()
	delete(fewer.Annotations, port) // the same generation, another set of keys
	ensure(fewer)
	if n := count(); n != 3 {
		t.Fatalf("%d events after the keys changed, want 3", n)
	}
	if msg := events.Find("default/web", EventReasonUnsupportedAnnotation)[2].Message; strings.Contains(msg, port) {
		t.Errorf("message %q names a key the Service no longer has", msg)
	}

	if err := h.p.EnsureLoadBalancerDeleted(ctx, "kubernetes", fewer); err != nil {
		t.Fatal(err)
	}
	if n := h.p.unsupported.Len(); n != 0 {
		t.Fatalf("%d Services remembered after the delete, want 0", n)
	}
	ensure(fewer) // made a LoadBalancer again: told again
	if n := count(); n != 4 {
		t.Fatalf("%d events after the Service came back, want 4", n)
	}

	clean := fewer.DeepCopy()
	clean.Annotations = nil
	ensure(clean)
	if n := count(); n != 4 || h.p.unsupported.Len() != 0 {
		t.Fatalf("%d events, %d remembered for a Service without unsupported keys; want 4, 0", n, h.p.unsupported.Len())
	}
}

// azlb verify, which derives its expectations from the documentation on its
// own, finds what the reconcile wrote for UDP, ClientIP, appProtocol and
// Local Services clean, in both probe modes.
func TestVerifyAgreesWithTheReconcile(t *testing.T) {
	for _, mode := range []string{"servicenodeport", "shared"} {
		t.Run(mode, func(t *testing.T) {
			h := newHarness(t, func(c *config.Config) {
				c.SecurityGroupName = "" // no NSG rules to judge: this provider writes none
				c.ClusterServiceLoadBalancerHealthProbeMode = mode
			})
			ctx := context.Background()
			nodes := []*v1.Node{testNode("n1", "10.240.0.4"), testNode("n2", "10.240.0.5")}

			dns := udpService(nil) // Cluster, TCP/80 and UDP/53, ClientIP
			dns.Spec.SessionAffinity = v1.ServiceAffinityClientIP
			local := udpService(nil) // Local, TCP/80 and UDP/53
			local.Name, local.UID = "local", "14141414-0000-0000-0000-000000000027"
			local.Spec.ExternalTrafficPolicy, local.Spec.HealthCheckNodePort = v1.ServiceExternalTrafficPolicyLocal, 32000
			app := testService("app", "15151515-0000-0000-0000-000000000027",
				map[string]string{annotations.KeyProbeRequestPath: "/ready", annotations.Prefix + "azure-unknown": "x"}, 80, 443)
			app.Spec.Ports[0].AppProtocol, app.Spec.Ports[1].AppProtocol = ptr.To("http"), ptr.To("HTTPS")
			explicit := udpService(map[string]string{annotations.PortKey(53, annotations.PortSuffixProbeProtocol): "Http"})
			explicit.Name, explicit.UID = "explicit", "16161616-0000-0000-0000-000000000027"

			svcs := []*v1.Service{dns, local, app, explicit}
			for _, svc := range svcs {
				st, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", svc, nodes)
				if err != nil {
					t.Fatalf("EnsureLoadBalancer %s: %v", svc.Name, err)
				}
				svc.Status.LoadBalancer = *st
			}
			lbs, err := h.clients.LoadBalancer.List(ctx, devenv.ResourceGroup)
			if err != nil {
				t.Fatal(err)
			}
			pips, err := h.clients.PublicIP.List(ctx, devenv.ResourceGroup)
			if err != nil {
				t.Fatal(err)
			}
			snap := func() *verify.Snapshot {
				return &verify.Snapshot{Config: h.env.Config, Services: svcs, Nodes: nodes,
					Namespaces: map[string]map[string]string{"default": {}}, LoadBalancers: lbs, PublicIPs: pips}
			}
			r := verify.Check(snap())
			if r.Services != len(svcs) || r.LoadBalancers != 1 {
				t.Fatalf("verify saw %d Services and %d load balancers, want %d and 1", r.Services, r.LoadBalancers, len(svcs))
			}
			if !r.Clean() {
				var b strings.Builder
				for _, f := range r.Findings {
					b.WriteString(f.String() + "\n")
				}
				t.Fatalf("verify finds the reconcile's work wrong:\n%s", b.String())
			}
			// The check has teeth: the ClientIP Service's rules back at
			// Default are a finding.
			for _, rule := range lbs[0].Properties.LoadBalancingRules {
				if names.Owns(names.FrontendBase(dns), *rule.Name) {
					rule.Properties.LoadDistribution = to.Ptr(armnetwork.LoadDistributionDefault)
				}
			}
			if r := verify.Check(snap()); len(r.Findings) != 2 {
				t.Fatalf("%d findings for the two Default rules of a ClientIP Service, want 2: %v", len(r.Findings), r.Findings)
			}
		})
	}
}

// The Azure cloud provider's scenario: service-wide and per-port probe
// settings, then externalTrafficPolicy Local. The Local Service's rules
// (ports 80 and 81) use exactly one probe, on healthCheckNodePort, with the
// service-wide settings; the per-port ones are named in a Warning event
// once per generation (issue 40 item 2).
func TestLocalServiceHasOneHealthCheckProbe(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()
	nodes := []*v1.Node{testNode("n1", "10.240.0.4")}
	svc := testService("web", "17171717-0000-0000-0000-000000000040", map[string]string{
		annotations.KeyProbeNumOfProbe: "5", annotations.PortKey(80, annotations.PortSuffixProbeNumOfProbe): "3",
		annotations.KeyProbeInterval: "15", annotations.PortKey(80, annotations.PortSuffixProbeInterval): "10",
		annotations.KeyProbeProtocol: "Http", annotations.KeyProbeRequestPath: "/",
	}, 80, 81)
	if _, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", svc, nodes); err != nil {
		t.Fatal(err)
	}
	probes := func() map[string]string {
		out := map[string]string{}
		for _, p := range h.lb(t, "kubernetes").Properties.Probes {
			if names.Owns(names.FrontendBase(svc), *p.Name) {
				out[*p.Name] = fmt.Sprintf("%s %d", probeString(p), *p.Properties.IntervalInSeconds) + fmt.Sprintf("x%d", *p.Properties.NumberOfProbes)
			}
		}
		return out
	}
	if got := probes()[names.Rule(svc, v1.ProtocolTCP, 80, v1.IPv4Protocol)]; got != "Http:30080:/ 10x3" {
		t.Fatalf("Cluster: port 80's probe %q, want its per-port settings; probes %v", got, probes())
	}
	drain(h.recorder)

	svc = svc.DeepCopy()
	svc.Generation++
	testutil.Local(svc)
	if _, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", svc, nodes); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{names.HealthCheckProbe(svc, v1.IPv4Protocol): "Http:32000:/ 15x5"}
	if got := probes(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Local: probes %v, want exactly %v", got, want)
	}
	for _, r := range h.lb(t, "kubernetes").Properties.LoadBalancingRules {
		if names.Owns(names.FrontendBase(svc), *r.Name) && !strings.HasSuffix(*r.Properties.Probe.ID, "/probes/"+names.HealthCheckProbe(svc, v1.IPv4Protocol)) {
			t.Errorf("rule %s uses probe %s", *r.Name, *r.Properties.Probe.ID)
		}
	}
	ev := strings.Join(drain(h.recorder), "\n")
	if strings.Count(ev, EventReasonProbeSettingsNotApplied) != 1 || !strings.Contains(ev, annotations.PortKey(80, annotations.PortSuffixProbeInterval)) ||
		!strings.Contains(ev, annotations.PortKey(80, annotations.PortSuffixProbeNumOfProbe)) {
		t.Errorf("events %q, want one %s naming port 80's settings", ev, EventReasonProbeSettingsNotApplied)
	}
	h.env.Emulator().ResetRequests()
	_, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", svc, nodes)
	if w := h.writes(); err != nil || w != 0 {
		t.Errorf("a reconcile with nothing to change: error %v, %d writes; want none", err, w)
	}
	if ev := strings.Join(drain(h.recorder), "\n"); strings.Contains(ev, EventReasonProbeSettingsNotApplied) {
		t.Errorf("told again in the same generation: %q", ev)
	}
}
