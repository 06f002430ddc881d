package verify

import (
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/azlb/azlb/internal/annotations"
	"github.com/azlb/azlb/internal/testutil"
)

// The internal dual-stack fixture: default/web made internal and
// dual-stack (IPv4 and IPv6 frontends in the configured subnet) on
// kubernetes-internal, with IP-based pools of both families over the two
// nodes, written out as docs/load-balancers.md describes it: the IPv6
// rule has floating IP off and sends to the NodePort (Dual-stack).

const (
	ilbID     = "/subscriptions/" + sub + "/resourceGroups/rg/providers/Microsoft.Network/loadBalancers/kubernetes-internal"
	subnetRef = vnetID + "/subnets/subnet"
)

func internalDualStackFixture() *Snapshot {
	s := fixture()
	svc := s.Services[0]
	svc.Annotations = map[string]string{"service.beta.kubernetes.io/azure-load-balancer-internal": "true"}
	svc.Spec.IPFamilies = []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}
	svc.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: "10.0.0.10"}, {IP: "fd00::10"}}
	s.Nodes = []*v1.Node{testutil.Node("n1", testutil.InternalIPs("10.0.0.1", "fd00::1")), testutil.Node("n2", testutil.InternalIPs("10.0.0.2", "fd00::2"))}
	s.PublicIPs = nil

	frontend := func(name, addr string, v armnetwork.IPVersion) *armnetwork.FrontendIPConfiguration {
		return &armnetwork.FrontendIPConfiguration{Name: ptr.To(name), Properties: &armnetwork.FrontendIPConfigurationPropertiesFormat{
			Subnet: &armnetwork.Subnet{ID: ptr.To(subnetRef)}, PrivateIPAddress: ptr.To(addr),
			PrivateIPAllocationMethod: ptr.To(armnetwork.IPAllocationMethodDynamic), PrivateIPAddressVersion: ptr.To(v)}}
	}
	rule := func(name, fe, pool string, backend int32, floating bool) *armnetwork.LoadBalancingRule {
		return &armnetwork.LoadBalancingRule{Name: ptr.To(name), Properties: &armnetwork.LoadBalancingRulePropertiesFormat{
			Protocol: ptr.To(armnetwork.TransportProtocolTCP), FrontendPort: ptr.To[int32](80), BackendPort: ptr.To(backend),
			EnableFloatingIP: ptr.To(floating), EnableTCPReset: ptr.To(true), IdleTimeoutInMinutes: ptr.To[int32](4),
			FrontendIPConfiguration: &armnetwork.SubResource{ID: ptr.To(ilbID + "/frontendIPConfigurations/" + fe)},
			BackendAddressPool:      &armnetwork.SubResource{ID: ptr.To(ilbID + "/backendAddressPools/" + pool)},
			Probe:                   &armnetwork.SubResource{ID: ptr.To(ilbID + "/probes/" + name)}}}
	}
	probe := func(name string) *armnetwork.Probe {
		return &armnetwork.Probe{Name: ptr.To(name), Properties: &armnetwork.ProbePropertiesFormat{Protocol: ptr.To(armnetwork.ProbeProtocolTCP),
			Port: ptr.To[int32](30080), IntervalInSeconds: ptr.To[int32](5), NumberOfProbes: ptr.To[int32](2)}}
	}
	pool := func(name string, entries ...*armnetwork.LoadBalancerBackendAddress) *armnetwork.BackendAddressPool {
		return &armnetwork.BackendAddressPool{Name: ptr.To(name), Properties: &armnetwork.BackendAddressPoolPropertiesFormat{LoadBalancerBackendAddresses: entries}}
	}
	s.LoadBalancers = []*armnetwork.LoadBalancer{{
		Name: ptr.To("kubernetes-internal"), ID: ptr.To(ilbID),
		SKU: &armnetwork.LoadBalancerSKU{Name: ptr.To(armnetwork.LoadBalancerSKUNameStandard)},
		Properties: &armnetwork.LoadBalancerPropertiesFormat{
			FrontendIPConfigurations: []*armnetwork.FrontendIPConfiguration{
				frontend(webBase, "10.0.0.10", armnetwork.IPVersionIPv4), frontend(webBase+"-IPv6", "fd00::10", armnetwork.IPVersionIPv6)},
			LoadBalancingRules: []*armnetwork.LoadBalancingRule{
				rule(webBase+"-TCP-80", webBase, "kubernetes", 80, true),
				rule(webBase+"-TCP-80-IPv6", webBase+"-IPv6", "kubernetes-IPv6", 30080, false)},
			Probes: []*armnetwork.Probe{probe(webBase + "-TCP-80"), probe(webBase + "-TCP-80-IPv6")},
			BackendAddressPools: []*armnetwork.BackendAddressPool{
				pool("kubernetes", entry("n1", "10.0.0.1", "None"), entry("n2", "10.0.0.2", "None")),
				pool("kubernetes-IPv6", entry("n1", "fd00::1", "None"), entry("n2", "fd00::2", "None"))},
		},
	}}
	return s
}

// ipv6Rule is the fixture's IPv6 rule.
func ipv6Rule(s *Snapshot) *armnetwork.LoadBalancingRulePropertiesFormat {
	return lbOf(s).LoadBalancingRules[1].Properties
}

// Issue 27 item 2: an internal Service's IPv6 rules have floating IP off
// and the NodePort as backend port; its IPv4 rules, and public Services'
// IPv6 rules, keep the Service's floating IP.
func TestInternalIPv6RuleWantsFloatingIPOff(t *testing.T) {
	tests := []struct {
		name   string
		change func(*Snapshot)
		want   []string // substrings, each of one finding, in the report's order
	}{
		{"floating IP off and the NodePort on IPv6 is clean", func(*Snapshot) {}, nil},
		{"the IPv6 rule with floating IP on and the Service port, as before the fix", func(s *Snapshot) {
			ipv6Rule(s).EnableFloatingIP, ipv6Rule(s).BackendPort = ptr.To(true), ptr.To[int32](80)
		}, []string{"rule " + webBase + "-TCP-80-IPv6 on kubernetes-internal: backendPort 80, want 30080",
			"rule " + webBase + "-TCP-80-IPv6 on kubernetes-internal: enableFloatingIP true, want false"}},
		{"the IPv4 rule keeps floating IP on", func(s *Snapshot) {
			p := lbOf(s).LoadBalancingRules[0].Properties
			p.EnableFloatingIP, p.BackendPort = ptr.To(false), ptr.To[int32](30080)
		}, []string{"rule " + webBase + "-TCP-80 on kubernetes-internal: backendPort 30080, want 80",
			"rule " + webBase + "-TCP-80 on kubernetes-internal: enableFloatingIP false, want true"}},
		{"floating IP off asked for: both families send to the NodePort", func(s *Snapshot) {
			s.Services[0].Annotations["service.beta.kubernetes.io/azure-disable-load-balancer-floating-ip"] = "true"
			p := lbOf(s).LoadBalancingRules[0].Properties
			p.EnableFloatingIP, p.BackendPort = ptr.To(false), ptr.To[int32](30080)
		}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := internalDualStackFixture()
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

// A public dual-stack Service's IPv6 rule keeps floating IP on (Azure's
// documented exception), and an HA ports rule keeps the Service's setting
// on an internal IPv6 frontend (it is no port's rule).
func TestIPv6FloatingIPOutsideInternalPortRules(t *testing.T) {
	m := &nodeMode{cfg: baseConfig(), cluster: "kubernetes"}
	public := webService()
	public.Spec.IPFamilies = []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}
	spec := mustSpec(t, public)
	rules, _ := m.wantRules(public, spec, v1.IPv6Protocol)
	if len(rules) != 1 || !rules[0].floating || rules[0].beport != 80 {
		t.Errorf("public IPv6 rule %+v, want floating IP on to port 80", rules)
	}
	ha := webService()
	ha.Annotations = map[string]string{"service.beta.kubernetes.io/azure-load-balancer-internal": "true",
		"service.beta.kubernetes.io/azure-load-balancer-enable-high-availability-ports": "true"}
	rules, _ = m.wantRules(ha, mustSpec(t, ha), v1.IPv6Protocol)
	if len(rules) != 1 || !rules[0].floating || rules[0].beport != 0 {
		t.Errorf("internal HA ports IPv6 rule %+v, want the Service's floating IP (on), backend port 0", rules)
	}
}

func mustSpec(t *testing.T, svc *v1.Service) *annotations.ServiceSpec {
	t.Helper()
	spec, err := annotations.Parse(svc)
	if err != nil {
		t.Fatalf("annotations: %v", err)
	}
	return spec
}
