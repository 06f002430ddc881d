package verify

import (
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/azlb/azlb/internal/testutil"
)

// withUDP adds port 53/UDP (node port 30053) to the web Service and its
// rule, written as docs/load-balancers.md describes it for a Cluster
// Service: no probe.
func withUDP(s *Snapshot) {
	s.Services[0].Spec.Ports = append(s.Services[0].Spec.Ports, v1.ServicePort{Name: "dns", Port: 53, NodePort: 30053, Protocol: v1.ProtocolUDP})
	lbOf(s).LoadBalancingRules = append(lbOf(s).LoadBalancingRules, &armnetwork.LoadBalancingRule{
		Name: ptr.To(webBase + "-UDP-53"),
		Properties: &armnetwork.LoadBalancingRulePropertiesFormat{
			Protocol: ptr.To(armnetwork.TransportProtocolUDP), FrontendPort: ptr.To[int32](53), BackendPort: ptr.To[int32](53),
			EnableFloatingIP: ptr.To(true), LoadDistribution: ptr.To(armnetwork.LoadDistributionDefault),
			FrontendIPConfiguration: &armnetwork.SubResource{ID: ptr.To(lbID + "/frontendIPConfigurations/" + webBase)},
			BackendAddressPool:      &armnetwork.SubResource{ID: ptr.To(lbID + "/backendAddressPools/kubernetes")},
		},
	})
}

// healthCheckProbe makes the fixture's probe a Local Service's one probe of
// healthCheckNodePort 32000 (Http at /healthz), which every rule with a
// probe uses.
func healthCheckProbe(s *Snapshot) {
	lb := lbOf(s)
	name := webBase + "-TCP-32000"
	lb.Probes[0].Name = ptr.To(name)
	lb.Probes[0].Properties = &armnetwork.ProbePropertiesFormat{Protocol: ptr.To(armnetwork.ProbeProtocolHTTP), Port: ptr.To[int32](32000),
		RequestPath: ptr.To("/healthz"), IntervalInSeconds: ptr.To[int32](5), NumberOfProbes: ptr.To[int32](2)}
	for _, r := range lb.LoadBalancingRules {
		if r.Properties.Probe != nil {
			r.Properties.Probe.ID = ptr.To(lbID + "/probes/" + name)
		}
	}
}

// udpRule is the UDP rule withUDP adds.
func udpRule(s *Snapshot) *armnetwork.LoadBalancingRulePropertiesFormat {
	return lbOf(s).LoadBalancingRules[1].Properties
}

// addProbe adds a probe to the load balancer and points the UDP rule at it.
func addUDPProbe(s *Snapshot, protocol armnetwork.ProbeProtocol, port int32, path string) {
	p := &armnetwork.Probe{Name: ptr.To(webBase + "-UDP-53"), Properties: &armnetwork.ProbePropertiesFormat{
		Protocol: ptr.To(protocol), Port: ptr.To(port), IntervalInSeconds: ptr.To[int32](5), NumberOfProbes: ptr.To[int32](2)}}
	if path != "" {
		p.Properties.RequestPath = ptr.To(path)
	}
	lbOf(s).Probes = append(lbOf(s).Probes, p)
	udpRule(s).Probe = &armnetwork.SubResource{ID: ptr.To(lbID + "/probes/" + webBase + "-UDP-53")}
}

// Issue 27: verify expects no probe on a Cluster Service's UDP ports (the
// shared probe in shared mode, the health-check probe for Local Services),
// loadDistribution SourceIP for sessionAffinity ClientIP, and Http(s)
// probes for appProtocol http(s).
func TestRulesProbesAndDistribution(t *testing.T) {
	lower := strings.ToLower(webBase)
	tests := []struct {
		name   string
		change func(*Snapshot)
		want   []string // substrings, each of one finding, in the report's order
	}{
		{"a UDP port of a Cluster Service without a probe is clean", withUDP, nil},
		{"a UDP rule probed by Tcp on its NodePort is a finding", func(s *Snapshot) {
			withUDP(s)
			addUDPProbe(s, armnetwork.ProbeProtocolTCP, 30053, "")
		}, []string{"probe " + webBase + "-UDP-53, which no rule of the Service calls for",
			"rule " + webBase + "-UDP-53 on kubernetes: probe " + lower + "-udp-53, want "}},
		{"a per-port probe protocol asks for the UDP probe", func(s *Snapshot) {
			withUDP(s)
			s.Services[0].Annotations = map[string]string{"service.beta.kubernetes.io/port_53_health-probe_protocol": "Tcp"}
			addUDPProbe(s, armnetwork.ProbeProtocolTCP, 30053, "")
		}, nil},
		{"a per-port probe port asks for it too, and it is missing", func(s *Snapshot) {
			withUDP(s)
			s.Services[0].Annotations = map[string]string{"service.beta.kubernetes.io/port_53_health-probe_port": "80"}
		}, []string{"has no probe " + webBase + "-UDP-53", "rule " + webBase + "-UDP-53 on kubernetes: probe , want " + lower + "-udp-53"}},
		{"a service-wide probe protocol does not ask for the UDP probe", func(s *Snapshot) {
			withUDP(s)
			s.Services[0].Annotations = map[string]string{"service.beta.kubernetes.io/azure-load-balancer-health-probe-protocol": "Tcp"}
		}, nil},
		{"shared probe mode: the UDP rule uses the shared probe too", func(s *Snapshot) {
			withUDP(s)
			s.Config.ClusterServiceLoadBalancerHealthProbeMode = "shared"
			lbOf(s).Probes = []*armnetwork.Probe{{Name: ptr.To("cluster-service-shared-health-probe"), Properties: &armnetwork.ProbePropertiesFormat{
				Protocol: ptr.To(armnetwork.ProbeProtocolHTTP), Port: ptr.To[int32](10256), RequestPath: ptr.To("/healthz"),
				IntervalInSeconds: ptr.To[int32](5), NumberOfProbes: ptr.To[int32](2)}}}
			lbOf(s).LoadBalancingRules[0].Properties.Probe = &armnetwork.SubResource{ID: ptr.To(lbID + "/probes/cluster-service-shared-health-probe")}
		}, []string{"rule " + webBase + "-UDP-53 on kubernetes: probe , want cluster-service-shared-health-probe"}},
		{"Local: the UDP rule uses the health-check probe", func(s *Snapshot) {
			withUDP(s)
			testutil.Local(s.Services[0])
			healthCheckProbe(s)
		}, []string{"rule " + webBase + "-UDP-53 on kubernetes: probe , want " + lower + "-tcp-32000"}},
		{"Local: one health-check probe for every rule, with the service-wide settings (issue 40 item 2)", func(s *Snapshot) {
			withUDP(s)
			testutil.Local(s.Services[0])
			healthCheckProbe(s)
			udpRule(s).Probe = &armnetwork.SubResource{ID: lbOf(s).LoadBalancingRules[0].Properties.Probe.ID}
			s.Services[0].Annotations = map[string]string{"service.beta.kubernetes.io/port_80_health-probe_interval": "10",
				"service.beta.kubernetes.io/azure-load-balancer-health-probe-num-of-probe": "3"}
		}, []string{"numberOfProbes 2, want 3"}},

		{"sessionAffinity ClientIP wants SourceIP", func(s *Snapshot) {
			s.Services[0].Spec.SessionAffinity = v1.ServiceAffinityClientIP
		}, []string{"rule " + webBase + "-TCP-80 on kubernetes: loadDistribution Default, want SourceIP"}},
		{"sessionAffinity ClientIP with SourceIP rules is clean", func(s *Snapshot) {
			withUDP(s)
			s.Services[0].Spec.SessionAffinity = v1.ServiceAffinityClientIP
			for _, r := range lbOf(s).LoadBalancingRules {
				r.Properties.LoadDistribution = ptr.To(armnetwork.LoadDistributionSourceIP)
			}
		}, nil},
		{"a SourceIP rule without sessionAffinity is a finding", func(s *Snapshot) {
			lbOf(s).LoadBalancingRules[0].Properties.LoadDistribution = ptr.To(armnetwork.LoadDistributionSourceIPProtocol)
		}, []string{"loadDistribution SourceIPProtocol, want Default"}},

		{"appProtocol http wants an Http probe at /", func(s *Snapshot) {
			s.Services[0].Spec.Ports[0].AppProtocol = ptr.To("HTTP")
		}, []string{"protocol Tcp, want Http", `requestPath "", want "/"`}},
		{"appProtocol https with a path annotation", func(s *Snapshot) {
			s.Services[0].Spec.Ports[0].AppProtocol = ptr.To("https")
			s.Services[0].Annotations = map[string]string{"service.beta.kubernetes.io/azure-load-balancer-health-probe-request-path": "/ready"}
		}, []string{"protocol Tcp, want Https", `requestPath "", want "/ready"`}},
		{"appProtocol http: an explicit probe protocol wins", func(s *Snapshot) {
			s.Services[0].Spec.Ports[0].AppProtocol = ptr.To("http")
			s.Services[0].Annotations = map[string]string{"service.beta.kubernetes.io/port_80_health-probe_protocol": "tcp"}
		}, nil},
		{"appProtocol of another kind leaves Tcp", func(s *Snapshot) {
			s.Services[0].Spec.Ports[0].AppProtocol = ptr.To("kubernetes.io/h2c")
		}, nil},
		{"appProtocol on a Local Service: the health-check probe", func(s *Snapshot) {
			testutil.Local(s.Services[0])
			s.Services[0].Spec.Ports[0].AppProtocol = ptr.To("https")
			healthCheckProbe(s)
		}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := fixture()
			tc.change(s)
			r := Check(s)
			got := findings(r)
			if len(r.Findings) != len(tc.want) {
				t.Fatalf("%d findings, want %d:\n%s", len(r.Findings), len(tc.want), got)
			}
			for i, w := range tc.want {
				if !strings.Contains(r.Findings[i].String(), w) {
					t.Errorf("finding %d = %q, want it to contain %q", i, r.Findings[i], w)
				}
			}
		})
	}
}
