package verify

import (
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/azlb/azlb/internal/config"
	"github.com/azlb/azlb/internal/names"
	"github.com/azlb/azlb/internal/testutil"
)

// The fixture: one Service default/web (port 80, node port 30080) on the
// default load balancer "kubernetes" with IP-based pools over two nodes,
// written out literally as the documentation describes it (not computed by
// any azlb code), so Check must find it clean.

const (
	sub     = "00000000-0000-0000-0000-000000000001"
	rg      = "rg"
	webUID  = "11111111-2222-3333-4444-555555555555"
	webBase = "a1111111122223333444455555555555" // "a" + the UID without dashes, 32 characters
	vnetID  = "/subscriptions/" + sub + "/resourceGroups/rg/providers/Microsoft.Network/virtualNetworks/vnet"
	lbID    = "/subscriptions/" + sub + "/resourceGroups/rg/providers/Microsoft.Network/loadBalancers/kubernetes"
	pipID   = "/subscriptions/" + sub + "/resourceGroups/rg/providers/Microsoft.Network/publicIPAddresses/kubernetes-" + webBase
)

func baseConfig() *config.Config {
	cfg := &config.Config{SubscriptionID: sub, ResourceGroup: rg, Location: "eastus", VnetName: "vnet", SubnetName: "subnet",
		LoadBalancerBackendPoolConfigurationType: config.BackendPoolNodeIP}
	cfg.SetDefaults()
	return cfg
}

func webService() *v1.Service {
	svc := testutil.Service("default", "web")
	svc.UID = webUID
	svc.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: "20.0.0.1"}}
	return svc
}

func entry(node, ip, state string) *armnetwork.LoadBalancerBackendAddress {
	return &armnetwork.LoadBalancerBackendAddress{Name: ptr.To(node), Properties: &armnetwork.LoadBalancerBackendAddressPropertiesFormat{
		IPAddress: ptr.To(ip), VirtualNetwork: &armnetwork.SubResource{ID: ptr.To(vnetID)},
		AdminState: ptr.To(armnetwork.LoadBalancerBackendAddressAdminState(state)),
	}}
}

func webLB() *armnetwork.LoadBalancer {
	return &armnetwork.LoadBalancer{
		Name: ptr.To("kubernetes"), ID: ptr.To(lbID),
		SKU: &armnetwork.LoadBalancerSKU{Name: ptr.To(armnetwork.LoadBalancerSKUNameStandard)},
		Properties: &armnetwork.LoadBalancerPropertiesFormat{
			FrontendIPConfigurations: []*armnetwork.FrontendIPConfiguration{{
				Name:       ptr.To(webBase),
				Properties: &armnetwork.FrontendIPConfigurationPropertiesFormat{PublicIPAddress: &armnetwork.PublicIPAddress{ID: ptr.To(pipID)}},
			}},
			LoadBalancingRules: []*armnetwork.LoadBalancingRule{{
				Name: ptr.To(webBase + "-TCP-80"),
				Properties: &armnetwork.LoadBalancingRulePropertiesFormat{
					Protocol: ptr.To(armnetwork.TransportProtocolTCP), FrontendPort: ptr.To[int32](80), BackendPort: ptr.To[int32](80),
					EnableFloatingIP: ptr.To(true), EnableTCPReset: ptr.To(true), IdleTimeoutInMinutes: ptr.To[int32](4),
					FrontendIPConfiguration: &armnetwork.SubResource{ID: ptr.To(lbID + "/frontendIPConfigurations/" + webBase)},
					BackendAddressPool:      &armnetwork.SubResource{ID: ptr.To(lbID + "/backendAddressPools/kubernetes")},
					Probe:                   &armnetwork.SubResource{ID: ptr.To(lbID + "/probes/" + webBase + "-TCP-80")},
				},
			}},
			Probes: []*armnetwork.Probe{{
				Name: ptr.To(webBase + "-TCP-80"),
				Properties: &armnetwork.ProbePropertiesFormat{Protocol: ptr.To(armnetwork.ProbeProtocolTCP), Port: ptr.To[int32](30080),
					IntervalInSeconds: ptr.To[int32](5), NumberOfProbes: ptr.To[int32](2)},
			}},
			BackendAddressPools: []*armnetwork.BackendAddressPool{{
				Name: ptr.To("kubernetes"),
				Properties: &armnetwork.BackendAddressPoolPropertiesFormat{LoadBalancerBackendAddresses: []*armnetwork.LoadBalancerBackendAddress{
					entry("n1", "10.0.0.1", "None"), entry("n2", "10.0.0.2", "None"),
				}},
			}},
		},
	}
}

func webPIP() *armnetwork.PublicIPAddress {
	return &armnetwork.PublicIPAddress{
		Name: ptr.To("kubernetes-" + webBase), ID: ptr.To(pipID),
		SKU:  &armnetwork.PublicIPAddressSKU{Name: ptr.To(armnetwork.PublicIPAddressSKUNameStandard)},
		Tags: map[string]*string{"k8s-azure-service": ptr.To("default/web"), "k8s-azure-cluster-name": ptr.To("kubernetes")},
		Properties: &armnetwork.PublicIPAddressPropertiesFormat{IPAddress: ptr.To("20.0.0.1"),
			PublicIPAllocationMethod: ptr.To(armnetwork.IPAllocationMethodStatic), PublicIPAddressVersion: ptr.To(armnetwork.IPVersionIPv4)},
	}
}

func fixture() *Snapshot {
	return &Snapshot{
		Config:        baseConfig(),
		Services:      []*v1.Service{webService()},
		Nodes:         []*v1.Node{testutil.Node("n1", testutil.InternalIPs("10.0.0.1")), testutil.Node("n2", testutil.InternalIPs("10.0.0.2"))},
		Namespaces:    map[string]map[string]string{"default": {}},
		LoadBalancers: []*armnetwork.LoadBalancer{webLB()},
		PublicIPs:     []*armnetwork.PublicIPAddress{webPIP()},
	}
}

func findings(r *Report) string {
	var b strings.Builder
	for _, f := range r.Findings {
		b.WriteString(f.String() + "\n")
	}
	return b.String()
}

func TestFixtureIsClean(t *testing.T) {
	if r := Check(fixture()); !r.Clean() {
		t.Fatalf("the documented state has findings:\n%s", findings(r))
	}
}

func lbOf(s *Snapshot) *armnetwork.LoadBalancerPropertiesFormat { return s.LoadBalancers[0].Properties }

// Each change of the cluster or of Azure that azlb has not (yet) carried
// out is one finding naming the object and the documented rule.
func TestIPBasedFindings(t *testing.T) {
	tests := []struct {
		name   string
		change func(*Snapshot)
		want   []string // substrings of the findings, in order
	}{
		{"floating IP off sends traffic to the node port", func(s *Snapshot) {
			s.Services[0].Annotations = map[string]string{"service.beta.kubernetes.io/azure-disable-load-balancer-floating-ip": "true"}
		}, []string{"backendPort 80, want 30080", "enableFloatingIP true, want false"}},
		{"idle timeout annotation", func(s *Snapshot) {
			s.Services[0].Annotations = map[string]string{"service.beta.kubernetes.io/azure-load-balancer-tcp-idle-timeout": "30"}
		}, []string{"idleTimeoutInMinutes 4, want 30"}},
		{"a new port", func(s *Snapshot) {
			s.Services[0].Spec.Ports = append(s.Services[0].Spec.Ports, v1.ServicePort{Name: "dns", Port: 53, NodePort: 30053, Protocol: v1.ProtocolUDP})
		}, []string{"has no rule " + webBase + "-UDP-53"}}, // a UDP port of a Cluster Service has no probe
		{"no probe rule", func(s *Snapshot) {
			s.Services[0].Annotations = map[string]string{"service.beta.kubernetes.io/port_80_no_probe_rule": "true"}
		}, []string{"probe " + webBase + "-TCP-80, which no rule of the Service calls for", "probe " + strings.ToLower(webBase) + "-tcp-80, want "}},
		{"Local Service probes healthCheckNodePort at /healthz", func(s *Snapshot) {
			testutil.Local(s.Services[0])
		}, []string{"has no probe " + webBase + "-TCP-32000", "has probe " + webBase + "-TCP-80, which no rule", "probe " + strings.ToLower(webBase) + "-tcp-80, want " + strings.ToLower(webBase) + "-tcp-32000"}},
		{"a per-port probe port over the Local default uses /", func(s *Snapshot) {
			testutil.Local(s.Services[0])
			s.Services[0].Annotations = map[string]string{"service.beta.kubernetes.io/port_80_health-probe_port": "http"}
		}, []string{"protocol Tcp, want Http", `requestPath "", want "/"`}},
		{"probe interval and count", func(s *Snapshot) {
			s.Services[0].Annotations = map[string]string{"service.beta.kubernetes.io/azure-load-balancer-health-probe-interval": "10",
				"service.beta.kubernetes.io/port_80_health-probe_num-of-probe": "3"}
		}, []string{"intervalInSeconds 5, want 10", "numberOfProbes 2, want 3"}},
		{"taint takes the node down", func(s *Snapshot) {
			s.Nodes[0].Spec.Taints = []v1.Taint{testutil.Taint("node.kubernetes.io/out-of-service", "x")}
		}, []string{"entry n1 (node n1) has adminState None, want Down (taints node.kubernetes.io/out-of-service)"}},
		{"a cluster pool no rule uses still follows taints", func(s *Snapshot) {
			s.Nodes[0].Spec.Taints = []v1.Taint{testutil.Taint("node.kubernetes.io/out-of-service", "x")}
			lbOf(s).BackendAddressPools = append(lbOf(s).BackendAddressPools, &armnetwork.BackendAddressPool{
				Name: ptr.To("kubernetes-IPv6"),
				Properties: &armnetwork.BackendAddressPoolPropertiesFormat{LoadBalancerBackendAddresses: []*armnetwork.LoadBalancerBackendAddress{
					entry("n1", "fd00::1", "None"), entry("n9", "fd00::9", "None"),
				}},
			})
		}, []string{"entry n1 (node n1) has adminState None, want Down", "pool kubernetes/kubernetes-IPv6: entry n1 (node n1) has adminState None, want Down"}},
		{"another draining value is not a trigger", func(s *Snapshot) {
			s.Nodes[0].Spec.Taints = []v1.Taint{testutil.Taint("cloudprovider.azure.microsoft.com/draining", "other")}
		}, nil},
		{"admin state off", func(s *Snapshot) {
			s.Config.EnableLoadBalancerAdminState = ptr.To(false)
			s.Nodes[0].Spec.Taints = []v1.Taint{testutil.Taint("node.kubernetes.io/out-of-service", "x")}
		}, nil},
		{"excluded node", func(s *Snapshot) {
			s.Nodes[1].Labels["node.kubernetes.io/exclude-from-external-load-balancers"] = "true"
		}, []string{"holds node n2, which does not belong: labelled node.kubernetes.io/exclude-from-external-load-balancers"}},
		{"exclusion label set to false", func(s *Snapshot) {
			s.Nodes[1].Labels["node.kubernetes.io/exclude-from-external-load-balancers"] = "false"
		}, nil},
		{"control-plane node", func(s *Snapshot) {
			s.Nodes[1].Labels["node-role.kubernetes.io/control-plane"] = ""
		}, []string{"holds node n2, which does not belong: a control-plane node"}},
		{"a node joins", func(s *Snapshot) {
			s.Nodes = append(s.Nodes, testutil.Node("n3", testutil.InternalIPs("10.0.0.3")))
		}, []string{"lacks node n3"}},
		{"a node leaves", func(s *Snapshot) { s.Nodes = s.Nodes[:1] }, []string{"entry n2 names no node"}},
		{"a node's address changes", func(s *Snapshot) {
			s.Nodes[1].Status.Addresses[0].Address = "10.0.0.22"
		}, []string{"entry n2 has address 10.0.0.2, want the node's InternalIP 10.0.0.22"}},
		{"the Service is deleted", func(s *Snapshot) { s.Services = nil }, []string{
			"frontend " + webBase + " belongs to no LoadBalancer Service",
			"probe " + webBase + "-TCP-80 belongs to no LoadBalancer Service",
			"rule " + webBase + "-TCP-80 belongs to no LoadBalancer Service",
			"azlb owns it (k8s-azure-service=default/web) but no frontend of that Service uses it",
		}},
		{"the Service stays Terminating", func(s *Snapshot) {
			s.Services[0].DeletionTimestamp = ptr.To(metav1.NewTime(time.Now()))
			s.Services[0].Finalizers = []string{"service.kubernetes.io/load-balancer-cleanup"}
			lbOf(s).FrontendIPConfigurations, lbOf(s).LoadBalancingRules, lbOf(s).Probes = nil, nil, nil
			s.PublicIPs = nil
		}, []string{"has no frontends: it should have been deleted", "is being deleted but still has the finalizer"}},
		{"it turns into a ClusterIP Service", func(s *Snapshot) { s.Services[0].Spec.Type = v1.ServiceTypeClusterIP }, []string{
			"frontend", "probe", "rule", "no frontend of that Service uses it"}},
		{"no frontend yet", func(s *Snapshot) { lbOf(s).FrontendIPConfigurations = nil }, []string{
			"has no frontends: it should have been deleted", "no frontend of that Service uses it",
			"has no frontend on any managed load balancer", "ingress lists [20.0.0.1]"}},
		{"the ingress IP is missing", func(s *Snapshot) { s.Services[0].Status.LoadBalancer.Ingress = nil }, []string{
			"status.loadBalancer.ingress is [], want its frontends' addresses [20.0.0.1]"}},
		{"internal annotation", func(s *Snapshot) {
			s.Services[0].Annotations = map[string]string{"service.beta.kubernetes.io/azure-load-balancer-internal": "true"}
		}, []string{"no frontend of that Service uses it", `uses subnet "", want`, "internal frontend " + webBase + " on kubernetes references public IP",
			"is on load balancer kubernetes, want an internal load balancer", "ingress is [20.0.0.1], want its frontends' addresses []"}},
		{"a leftover pool", func(s *Snapshot) {
			lbOf(s).BackendAddressPools = append(lbOf(s).BackendAddressPools, &armnetwork.BackendAddressPool{Name: ptr.To("default-web")})
		}, []string{"pool default-web is neither a cluster pool nor the dedicated pool"}},
		{"a load balancer of someone else is left alone", func(s *Snapshot) {
			s.LoadBalancers = append(s.LoadBalancers, &armnetwork.LoadBalancer{Name: ptr.To("theirs"),
				SKU: &armnetwork.LoadBalancerSKU{Name: ptr.To(armnetwork.LoadBalancerSKUNameStandard)}})
		}, nil},
		{"invalid annotations are skipped, not judged", func(s *Snapshot) {
			s.Services[0].Annotations = map[string]string{"service.beta.kubernetes.io/azure-load-balancer-internal": "maybe"}
		}, nil},
		{"shared probe mode", func(s *Snapshot) { s.Config.ClusterServiceLoadBalancerHealthProbeMode = "shared" }, []string{
			"has no probe cluster-service-shared-health-probe", "probe " + webBase + "-TCP-80, which no rule of the Service calls for",
			"probe " + strings.ToLower(webBase) + "-tcp-80, want cluster-service-shared-health-probe"}},
		{"disableOutboundSNAT", func(s *Snapshot) { s.Config.DisableOutboundSNAT = ptr.To(true) }, []string{"disableOutboundSnat false, want true"}},
		{"the public IP loses its tags", func(s *Snapshot) { s.PublicIPs[0].Tags = nil }, []string{"lacks azlb's tags"}},
		{"azure-pip-name", func(s *Snapshot) {
			s.Services[0].Annotations = map[string]string{"service.beta.kubernetes.io/azure-pip-name": "mine"}
		}, []string{"uses public IP kubernetes-" + webBase + ", want mine"}},
		{"a requested address", func(s *Snapshot) {
			s.Services[0].Annotations = map[string]string{"service.beta.kubernetes.io/azure-load-balancer-ipv4": "20.0.0.9"}
			s.PublicIPs = append(s.PublicIPs, &armnetwork.PublicIPAddress{ID: ptr.To("/subscriptions/sub/resourceGroups/rg/providers/Microsoft.Network/publicIPAddresses/other"),
				Name: ptr.To("other"), Properties: &armnetwork.PublicIPAddressPropertiesFormat{IPAddress: ptr.To("20.0.0.9")}})
		}, []string{"want the public IP with address 20.0.0.9"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := fixture()
			tc.change(s)
			r := Check(s)
			got := findings(r)
			if len(tc.want) == 0 && !r.Clean() {
				t.Fatalf("want clean, got:\n%s", got)
			}
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

func TestInvalidAnnotationsAreListedAsSkipped(t *testing.T) {
	s := fixture()
	s.Services[0].Annotations = map[string]string{"service.beta.kubernetes.io/azure-load-balancer-internal": "maybe"}
	r := Check(s)
	if len(r.Skipped) != 1 || !strings.Contains(r.Skipped[0].Message, "azure-load-balancer-internal") {
		t.Fatalf("skipped %v", r.Skipped)
	}
	var out strings.Builder
	if err := r.Write(&out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "SKIP  service default/web: refused (InvalidLoadBalancerAnnotation): invalid annotations") || !strings.Contains(out.String(), "clean") {
		t.Fatalf("output:\n%s", out.String())
	}
}

// multiFixture is the fixture with two configurations: web on
// "kubernetes", the nodes placed there.
func multiFixture() *Snapshot {
	s := fixture()
	s.Config.MultipleStandardLoadBalancerConfigurations = []config.MultipleStandardLoadBalancerConfiguration{
		{Name: "kubernetes"},
		{Name: "lb-2", NodeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"pool": "two"}},
			ServiceNamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "b"}}},
	}
	return s
}

func TestMultipleLoadBalancers(t *testing.T) {
	if r := Check(multiFixture()); !r.Clean() {
		t.Fatalf("multi fixture:\n%s", findings(r))
	}
	t.Run("a node whose labels make lb-2 its only target", func(t *testing.T) {
		s := multiFixture()
		s.Nodes[0].Labels["pool"] = "two"
		r := Check(s)
		if len(r.Findings) != 1 || !strings.Contains(r.Findings[0].String(), "node n1: is in the IPv4 cluster pool of kubernetes, which is not a valid target for it (targets: lb-2)") {
			t.Fatalf("%s", findings(r))
		}
	})
	t.Run("a Service whose annotation names another configuration", func(t *testing.T) {
		s := multiFixture()
		s.Services[0].Annotations = map[string]string{"service.beta.kubernetes.io/azure-load-balancer-configurations": "lb-2"}
		s.Namespaces["default"] = map[string]string{"team": "b"}
		r := Check(s)
		if len(r.Findings) != 1 || !strings.Contains(findings(r), "is on load balancer kubernetes, but service.beta.kubernetes.io/azure-load-balancer-configurations names only lb-2") {
			t.Fatalf("%s", findings(r))
		}
	})
	// Issue 37, item 6: a documented refusal is one SKIP line, never drift.
	t.Run("a Service no configuration accepts is refused", func(t *testing.T) {
		s := multiFixture()
		s.Services[0].Annotations = map[string]string{"service.beta.kubernetes.io/azure-load-balancer-configurations": "lb-2"}
		r := Check(s)
		if !r.Clean() || len(r.Skipped) != 1 || !strings.Contains(r.Skipped[0].Message, "refused (LoadBalancerPlacementFailed)") {
			t.Fatalf("findings:\n%s\nskipped: %v", findings(r), r.Skipped)
		}
	})
	t.Run("a Service that a selector matches belongs on that load balancer (issue 40 item 8)", func(t *testing.T) {
		s := multiFixture()
		s.Namespaces = map[string]map[string]string{"default": {"team": "b"}}
		r := Check(s)
		if len(r.Findings) != 1 || !strings.Contains(findings(r), "is on load balancer kubernetes, which has no Service selector, but the selectors of lb-2 match the Service: it belongs there") {
			t.Fatalf("%s", findings(r))
		}
	})
	t.Run("a Local Service gets its dedicated pool of endpoint nodes", func(t *testing.T) {
		s := multiFixture()
		testutil.Local(s.Services[0])
		lb := lbOf(s)
		lb.LoadBalancingRules[0].Properties.BackendAddressPool.ID = ptr.To(lbID + "/backendAddressPools/default.web")
		healthCheckProbe(s)
		lb.BackendAddressPools = append(lb.BackendAddressPools, &armnetwork.BackendAddressPool{Name: ptr.To("default.web"),
			Properties: &armnetwork.BackendAddressPoolPropertiesFormat{LoadBalancerBackendAddresses: []*armnetwork.LoadBalancerBackendAddress{
				entry("n1", "10.0.0.1", "None")}}})
		s.Slices = []*discoveryv1.EndpointSlice{{
			ObjectMeta:  metav1.ObjectMeta{Namespace: "default", Name: "web-1", Labels: map[string]string{discoveryv1.LabelServiceName: "web"}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints: []discoveryv1.Endpoint{
				{Addresses: []string{"10.244.0.1"}, NodeName: ptr.To("n1")},
				{Addresses: []string{"10.244.0.2"}, NodeName: ptr.To("n2"), Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(false)}},
			},
		}}
		if r := Check(s); !r.Clean() {
			t.Fatalf("%s", findings(r))
		}
		s.Slices[0].Endpoints[1].Conditions.Ready = nil // unset counts as ready
		r := Check(s)
		if len(r.Findings) != 1 || !strings.Contains(findings(r), "pool kubernetes/default.web: lacks node n2") {
			t.Fatalf("%s", findings(r))
		}
	})
}

func TestNICBasedPool(t *testing.T) {
	s := fixture()
	s.Config.LoadBalancerBackendPoolConfigurationType = config.BackendPoolNodeIPConfiguration
	vmss := "/subscriptions/" + sub + "/resourceGroups/rg/providers/Microsoft.Compute/virtualMachineScaleSets/pool"
	for i, n := range s.Nodes {
		n.Spec.ProviderID = names.ProviderIDPrefix + vmss + "/virtualMachines/" + string(rune('0'+i))
	}
	member := func(i int, state string) *armnetwork.LoadBalancerBackendAddress {
		id := vmss + "/virtualMachines/" + string(rune('0'+i)) + "/networkInterfaces/nic/ipConfigurations/ipconfig1"
		return &armnetwork.LoadBalancerBackendAddress{Name: ptr.To("m" + string(rune('0'+i))), Properties: &armnetwork.LoadBalancerBackendAddressPropertiesFormat{
			NetworkInterfaceIPConfiguration: &armnetwork.SubResource{ID: ptr.To(id)}, AdminState: ptr.To(armnetwork.LoadBalancerBackendAddressAdminState(state))}}
	}
	s.VMs = map[string]VM{
		"n1": {Exists: true, Running: true, Owners: []string{strings.ToLower(vmss + "/virtualMachines/0")}},
		"n2": {Exists: true, Running: true, Owners: []string{strings.ToLower(vmss + "/virtualMachines/1")}},
	}
	pool := lbOf(s).BackendAddressPools[0].Properties
	pool.LoadBalancerBackendAddresses = []*armnetwork.LoadBalancerBackendAddress{member(0, "None"), member(1, "None")}
	if r := Check(s); !r.Clean() {
		t.Fatalf("%s", findings(r))
	}
	// A stopped VM's member may stay or go; a running one must be there.
	pool.LoadBalancerBackendAddresses = pool.LoadBalancerBackendAddresses[:1]
	s.VMs["n2"] = VM{Exists: true, Owners: s.VMs["n2"].Owners}
	if r := Check(s); !r.Clean() {
		t.Fatalf("stopped VM: %s", findings(r))
	}
	s.VMs["n2"] = VM{Exists: true, Running: true, Owners: s.VMs["n2"].Owners}
	if r := Check(s); len(r.Findings) != 1 || !strings.Contains(findings(r), "lacks node n2 (its VM runs)") {
		t.Fatalf("running VM missing: %s", findings(r))
	}
	// An excluded node leaves, unless it is the last member.
	pool.LoadBalancerBackendAddresses = []*armnetwork.LoadBalancerBackendAddress{member(0, "None"), member(1, "None")}
	s.Nodes[1].Labels["node.kubernetes.io/exclude-from-external-load-balancers"] = "true"
	if r := Check(s); len(r.Findings) != 1 || !strings.Contains(findings(r), "holds node n2, which does not belong") {
		t.Fatalf("excluded: %s", findings(r))
	}
	s.Nodes[0].Labels["node.kubernetes.io/exclude-from-external-load-balancers"] = "true"
	if r := Check(s); !r.Clean() {
		t.Fatalf("all excluded keeps them: %s", findings(r))
	}
	// Admin state on NIC-derived entries; IP entries do not mix in.
	delete(s.Nodes[0].Labels, "node.kubernetes.io/exclude-from-external-load-balancers")
	delete(s.Nodes[1].Labels, "node.kubernetes.io/exclude-from-external-load-balancers")
	s.Nodes[1].Spec.Taints = []v1.Taint{testutil.Taint("node.cloudprovider.kubernetes.io/shutdown", "")}
	pool.LoadBalancerBackendAddresses = append(pool.LoadBalancerBackendAddresses, entry("n3", "10.0.0.3", "None"))
	r := Check(s)
	if len(r.Findings) != 2 || !strings.Contains(findings(r), "has IP entry n3 in a NIC-based pool") || !strings.Contains(findings(r), "entry m1 (node n2) has adminState None, want Down") {
		t.Fatalf("%s", findings(r))
	}
}

func TestPodBased(t *testing.T) {
	cfg := baseConfig()
	cfg.ServiceGatewayEnabled, cfg.LoadBalancerSKU, cfg.LoadBalancerBackendPoolConfigurationType = true, "service", config.BackendPoolPodIP
	uid := "22222222-3333-4444-5555-666666666666"
	svc := testutil.Service("default", "api")
	svc.UID = types.UID(uid)
	svc.Finalizers = []string{"servicegateway.azure.com/service-cleanup"}
	svc.Spec.Ports[0].TargetPort.IntVal = 8080
	svc.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: "20.0.0.5"}}
	lbid := "/subscriptions/" + sub + "/resourceGroups/rg/providers/Microsoft.Network/loadBalancers/" + uid
	pipid := "/subscriptions/" + sub + "/resourceGroups/rg/providers/Microsoft.Network/publicIPAddresses/" + uid + "-pip"
	tags := map[string]*string{"k8s-azure-service": ptr.To("default/api"), "k8s-azure-cluster-name": ptr.To("kubernetes")}
	s := &Snapshot{
		Config:   cfg,
		Services: []*v1.Service{svc},
		Nodes:    []*v1.Node{testutil.Node("n1", testutil.InternalIPs("10.0.0.1"))},
		Slices: []*discoveryv1.EndpointSlice{{
			ObjectMeta:  metav1.ObjectMeta{Namespace: "default", Name: "api-1", Labels: map[string]string{discoveryv1.LabelServiceName: "api"}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.244.0.7"}, NodeName: ptr.To("n1")}},
		}},
		LoadBalancers: []*armnetwork.LoadBalancer{{
			Name: ptr.To(uid), ID: ptr.To(lbid), SKU: &armnetwork.LoadBalancerSKU{Name: ptr.To(armnetwork.LoadBalancerSKUName("Service"))},
			Tags: map[string]*string{"k8s-azure-cluster-name": ptr.To("kubernetes")},
			Properties: &armnetwork.LoadBalancerPropertiesFormat{
				Scope: ptr.To(armnetwork.LoadBalancerScope("Public")),
				FrontendIPConfigurations: []*armnetwork.FrontendIPConfiguration{{Name: ptr.To("frontend"),
					Properties: &armnetwork.FrontendIPConfigurationPropertiesFormat{PublicIPAddress: &armnetwork.PublicIPAddress{ID: ptr.To(pipid)}}}},
				BackendAddressPools: []*armnetwork.BackendAddressPool{{Name: ptr.To(uid)}},
				LoadBalancingRules: []*armnetwork.LoadBalancingRule{{Name: ptr.To("rule-tcp-80"), Properties: &armnetwork.LoadBalancingRulePropertiesFormat{
					Protocol: ptr.To(armnetwork.TransportProtocolTCP), FrontendPort: ptr.To[int32](80), BackendPort: ptr.To[int32](8080),
					EnableFloatingIP: ptr.To(false), EnableTCPReset: ptr.To(true), IdleTimeoutInMinutes: ptr.To[int32](4),
					FrontendIPConfiguration: &armnetwork.SubResource{ID: ptr.To(lbid + "/frontendIPConfigurations/frontend")},
					BackendAddressPool:      &armnetwork.SubResource{ID: ptr.To(lbid + "/backendAddressPools/" + uid)},
				}}},
			},
		}},
		PublicIPs: []*armnetwork.PublicIPAddress{{Name: ptr.To(uid + "-pip"), ID: ptr.To(pipid), Tags: tags,
			SKU: &armnetwork.PublicIPAddressSKU{Name: ptr.To(armnetwork.PublicIPAddressSKUName("StandardV2"))},
			Properties: &armnetwork.PublicIPAddressPropertiesFormat{IPAddress: ptr.To("20.0.0.5"),
				PublicIPAllocationMethod: ptr.To(armnetwork.IPAllocationMethodStatic)}}},
		Gateway: &Gateway{
			Services: []*armnetwork.ServiceGatewayService{
				{Name: ptr.To(uid), Properties: &armnetwork.ServiceGatewayServicePropertiesFormat{ServiceType: ptr.To(armnetwork.ServiceType("Inbound")),
					LoadBalancerBackendPools: []*armnetwork.BackendAddressPool{{ID: ptr.To(lbid + "/backendAddressPools/" + uid)}}}},
				{Name: ptr.To("default-natgw"), Properties: &armnetwork.ServiceGatewayServicePropertiesFormat{ServiceType: ptr.To(armnetwork.ServiceType("Outbound"))}},
			},
			Locations: []*armnetwork.ServiceGatewayAddressLocationResponse{{AddressLocation: ptr.To("10.0.0.1"),
				Addresses: []*armnetwork.ServiceGatewayAddress{{Address: ptr.To("10.244.0.7"), Services: []*string{ptr.To(uid)}}}}},
		},
	}
	if r := Check(s); !r.Clean() {
		t.Fatalf("%s", findings(r))
	}
	// The pool carries the configured drain period, as node mode's do.
	cfg.LoadBalancerBackendPoolDrainPeriodInSeconds = ptr.To(30)
	if r := Check(s); len(r.Findings) != 1 || !strings.Contains(findings(r), "pool "+uid+" has drainPeriodInSeconds 0, want 30") {
		t.Fatalf("drain period configured, none on the pod pool: %s", findings(r))
	}
	pool := s.LoadBalancers[0].Properties.BackendAddressPools[0]
	pool.Properties = &armnetwork.BackendAddressPoolPropertiesFormat{DrainPeriodInSeconds: ptr.To[int32](30)}
	if r := Check(s); !r.Clean() {
		t.Fatalf("drain period on the pod pool: %s", findings(r))
	}
	cfg.LoadBalancerBackendPoolDrainPeriodInSeconds = nil
	if r := Check(s); len(r.Findings) != 1 || !strings.Contains(findings(r), "has drainPeriodInSeconds 30, want 0") {
		t.Fatalf("none configured, one on the pod pool: %s", findings(r))
	}
	pool.Properties = nil
	// security-groups.md does not cover pod-based load balancing: a
	// configured security group changes nothing.
	cfg.SecurityGroupName = "nsg"
	if r := Check(s); !r.Clean() || len(r.Skipped) != 0 || strings.Contains(r.Summary(), "security group") {
		t.Fatalf("pod-based with a security group: %s %v %s", findings(r), r.Skipped, r.Summary())
	}
	// Source ranges are refused, and fail closed: its pod still in the
	// gateway is a finding; once withdrawn, the Service is skipped.
	svc.Spec.LoadBalancerSourceRanges = []string{"10.0.0.0/24"}
	if r := Check(s); len(r.Findings) != 1 || len(r.Skipped) != 1 ||
		!strings.Contains(findings(r), "address 10.244.0.7 is default/api under 10.0.0.1, want absent") {
		t.Fatalf("pod-based with source ranges, pod in the gateway: %s %v", findings(r), r.Skipped)
	}
	locs := s.Gateway.Locations
	s.Gateway.Locations = nil
	if r := Check(s); !r.Clean() || len(r.Skipped) != 1 {
		t.Fatalf("pod-based with source ranges, pod withdrawn: %s %v", findings(r), r.Skipped)
	}
	s.Gateway.Locations = locs
	svc.Spec.LoadBalancerSourceRanges = nil
	// The pod moves to another node; a deleted Service's registration stays.
	s.Nodes = append(s.Nodes, testutil.Node("n2", testutil.InternalIPs("10.0.0.3", "10.0.0.2")))
	s.Slices[0].Endpoints[0].NodeName = ptr.To("n2")
	s.Gateway.Services = append(s.Gateway.Services, &armnetwork.ServiceGatewayService{Name: ptr.To("33333333-3333-4444-5555-666666666666")})
	r := Check(s)
	got := findings(r)
	if len(r.Findings) != 2 || !strings.Contains(got, "address 10.244.0.7 is default/api under 10.0.0.1, want default/api under 10.0.0.2") ||
		!strings.Contains(got, "holds service 33333333-3333-4444-5555-666666666666 of no LoadBalancer Service") {
		t.Fatalf("%s", got)
	}
	// A refused Service is skipped (dual-stack), its resources kept.
	s = &Snapshot{Config: cfg, Services: []*v1.Service{svc}, LoadBalancers: s.LoadBalancers, PublicIPs: s.PublicIPs, Gateway: &Gateway{}}
	svc.Spec.IPFamilies = []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}
	if r := Check(s); !r.Clean() || len(r.Skipped) != 1 {
		t.Fatalf("refused: %s %v", findings(r), r.Skipped)
	}
}

// A Service whose rule has floating IP off and no node port
// (allocateLoadBalancerNodePorts false) is refused by azlb: skipped, not
// judged; with floating IP on it is judged (its rule goes without a probe).
func TestServiceWithoutNodePorts(t *testing.T) {
	s := fixture()
	s.Services[0].Spec.Ports[0].NodePort = 0
	s.Services[0].Annotations = map[string]string{"service.beta.kubernetes.io/azure-disable-load-balancer-floating-ip": "true"}
	r := Check(s)
	if len(r.Skipped) != 1 || !strings.Contains(r.Skipped[0].Message, "no node port") {
		t.Fatalf("floating IP off: skipped %v, findings %s", r.Skipped, findings(r))
	}
	s = fixture()
	s.Services[0].Spec.Ports[0].NodePort = 0
	if r := Check(s); len(r.Skipped) != 0 || !strings.Contains(findings(r), "which no rule of the Service calls for") {
		t.Fatalf("floating IP on: the Service must be judged (its probe is unwanted now): skipped %v, findings %s", r.Skipped, findings(r))
	}
}
