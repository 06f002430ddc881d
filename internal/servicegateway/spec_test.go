package servicegateway

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/azlb/azlb/internal/annotations"
)

func lbService(mutate func(*v1.Service)) *v1.Service {
	s := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "svc", UID: uidA},
		Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, Ports: []v1.ServicePort{
			{Name: "a", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: v1.ProtocolTCP}}},
	}
	if mutate != nil {
		mutate(s)
	}
	return s
}

// B5: each refusal names its reason and the field.
func TestAdmit(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*v1.Service)
		reason string
		field  string
	}{
		{"internal", func(s *v1.Service) { s.Annotations = map[string]string{annotations.KeyInternal: "TRUE"} }, ReasonUnsupportedInternal, annotations.KeyInternal},
		{"affinity", func(s *v1.Service) { s.Spec.SessionAffinity = v1.ServiceAffinityClientIP }, ReasonUnsupportedAffinity, "spec.sessionAffinity"},
		{"loadBalancerIP", func(s *v1.Service) { s.Spec.LoadBalancerIP = "1.2.3.4" }, ReasonUnsupportedLoadBalancerIP, "spec.loadBalancerIP"},
		{"dual-stack", func(s *v1.Service) { s.Spec.IPFamilies = []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol} }, ReasonUnsupportedDualStack, "spec.ipFamilies"},
		{"idle not a number", func(s *v1.Service) { s.Annotations = map[string]string{annotations.KeyTCPIdleTimeout: "x"} }, ReasonInvalidIdleTimeout, annotations.KeyTCPIdleTimeout},
		{"idle too long", func(s *v1.Service) { s.Annotations = map[string]string{annotations.KeyTCPIdleTimeout: "31"} }, ReasonInvalidIdleTimeout, "4 to 30"},
		{"idle too short", func(s *v1.Service) { s.Annotations = map[string]string{annotations.KeyTCPIdleTimeout: "3"} }, ReasonInvalidIdleTimeout, "4 to 30"},
		{"named target port", func(s *v1.Service) { s.Spec.Ports[0].TargetPort = intstr.FromString("http") }, ReasonUnsupportedNamedPort, "spec.ports[0].targetPort"},
		{"SCTP", func(s *v1.Service) { s.Spec.Ports[0].Protocol = v1.ProtocolSCTP }, ReasonUnsupportedProtocol, "spec.ports[0].protocol"},
		{"backend collision", func(s *v1.Service) {
			s.Spec.Ports = append(s.Spec.Ports, v1.ServicePort{Name: "b", Port: 81, TargetPort: intstr.FromInt32(8080), Protocol: v1.ProtocolTCP})
		}, ReasonBackendPortCollision, "spec.ports[0] and spec.ports[1]"},
		{"source ranges", func(s *v1.Service) { s.Spec.LoadBalancerSourceRanges = []string{"203.0.113.0/24"} }, ReasonUnsupportedAccessControl, "spec.loadBalancerSourceRanges"},
		{"allowed IP ranges", func(s *v1.Service) {
			s.Annotations = map[string]string{annotations.KeyAllowedIPRanges: "203.0.113.0/24"}
		}, ReasonUnsupportedAccessControl, annotations.KeyAllowedIPRanges},
		{"allowed service tags", func(s *v1.Service) {
			s.Annotations = map[string]string{annotations.KeyAllowedServiceTags: "AzureFrontDoor.Backend"}
		}, ReasonUnsupportedAccessControl, annotations.KeyAllowedServiceTags},
		{"deny all, even empty", func(s *v1.Service) { s.Annotations = map[string]string{annotations.KeyDenyAllExceptRanges: ""} }, ReasonUnsupportedAccessControl, annotations.KeyDenyAllExceptRanges},
		{"frontend port 65535", func(s *v1.Service) { s.Spec.Ports[0].Port = 65535 }, ReasonUnsupportedPort, "spec.ports[0]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec, rej := admit(lbService(tt.mutate))
			if rej == nil || spec != nil {
				t.Fatalf("admitted: %+v", spec)
			}
			if rej.reason != tt.reason || !strings.Contains(rej.message, tt.field) {
				t.Errorf("got %s: %s; want %s naming %s", rej.reason, rej.message, tt.reason, tt.field)
			}
		})
	}
}

// TCP and UDP on one port, the idle timeout, IPv6, port 0 target, names;
// externalTrafficPolicy Local is accepted.
func TestAdmitSpec(t *testing.T) {
	spec, rej := admit(lbService(func(s *v1.Service) {
		s.Annotations = map[string]string{annotations.KeyTCPIdleTimeout: "30"}
		s.Spec.IPFamilies = []v1.IPFamily{v1.IPv6Protocol}
		s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
		s.Spec.Ports = []v1.ServicePort{
			{Name: "dns-tcp", Port: 53, TargetPort: intstr.FromInt32(5353), Protocol: v1.ProtocolTCP},
			{Name: "dns-udp", Port: 53, TargetPort: intstr.FromInt32(5353), Protocol: v1.ProtocolUDP},
			{Name: "web", Port: 443, Protocol: v1.ProtocolTCP},
		}
	}))
	if rej != nil {
		t.Fatal(rej)
	}
	want := &lbSpec{family: v1.IPv6Protocol, idle: 30, rules: []ruleSpec{
		{"rule-tcp-443", v1.ProtocolTCP, 443, 443}, {"rule-tcp-53", v1.ProtocolTCP, 53, 5353}, {"rule-udp-53", v1.ProtocolUDP, 53, 5353}}}
	if !spec.equal(want) {
		t.Fatalf("spec %+v, want %+v", spec, want)
	}
}

// B27, B28: the pinned strings of the load balancer, public IP and
// registration, and the pool's virtual network in vnetResourceGroup.
func TestPinnedWireValues(t *testing.T) {
	h := newHarness(t)
	h.cfg.VnetResourceGroup = "net-rg"
	e := &Controller{cfg: h.cfg, vnetID: "/subscriptions/sub/resourceGroups/net-rg/providers/Microsoft.Network/virtualNetworks/vnet"}
	spec, _ := admit(lbService(func(s *v1.Service) {
		s.Spec.Ports = append(s.Spec.Ports, v1.ServicePort{Name: "u", Port: 53, TargetPort: intstr.FromInt32(53), Protocol: v1.ProtocolUDP})
	}))
	store := newTestStore(t, h)
	e.store = store
	lb, _ := json.Marshal(e.desiredLB(uidA, spec, "/pip"))
	for _, want := range []string{`"sku":{"name":"Service","tier":"Regional"}`, `"scope":"Public"`, `"name":"frontend"`,
		`"probes":[]`, `"enableFloatingIP":false`, `"protocol":"Udp"`, `"protocol":"Tcp"`, `"enableTcpReset":false`, `"enableTcpReset":true`,
		`"name":"rule-udp-53"`, `"name":"rule-tcp-80"`, `"idleTimeoutInMinutes":4`} {
		if !strings.Contains(string(lb), want) {
			t.Errorf("load balancer lacks %s: %s", want, lb)
		}
	}
	pip, _ := json.Marshal(e.publicIP(lbService(nil), v1.IPv6Protocol))
	for _, want := range []string{`"sku":{"name":"StandardV2","tier":"Regional"}`, `"publicIPAllocationMethod":"Static"`, `"publicIPAddressVersion":"IPv6"`, `"k8s-azure-cluster-name":"kubernetes"`} {
		if !strings.Contains(string(pip), want) {
			t.Errorf("public IP lacks %s: %s", want, pip)
		}
	}
	reg, _ := json.Marshal(e.registration(uidA, true))
	for _, want := range []string{`"action":"PartialUpdate"`, `"isDelete":false`, `"serviceType":"Inbound"`, `"isDefault":false`,
		`"virtualNetwork":{"id":"/subscriptions/sub/resourceGroups/net-rg/providers/Microsoft.Network/virtualNetworks/vnet"}`} {
		if !strings.Contains(string(reg), want) {
			t.Errorf("registration lacks %s: %s", want, reg)
		}
	}
	unlink, _ := json.Marshal(e.registration(uidA, false))
	if !strings.Contains(string(unlink), `"loadBalancerBackendPools":[]`) {
		t.Errorf("unlinking must send an empty array, not omit it: %s", unlink)
	}
	unreg, _ := json.Marshal(e.unregistration(uidA))
	if string(unreg) != `{"action":"PartialUpdate","serviceRequests":[{"isDelete":true,"service":{"name":"`+uidA+`"}}]}` {
		t.Errorf("unregistration %s", unreg)
	}
}

// Bugs 37, 38, 39: family per address, FQDN slices ignored, malformed
// addresses skipped, not-ready excluded, the smallest same-family node IP,
// slices of another Service of the same name ignored.
func TestServiceEndpoints(t *testing.T) {
	cs := fake.NewClientset(
		&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: v1.NodeStatus{Addresses: []v1.NodeAddress{
			{Type: v1.NodeInternalIP, Address: "10.1.0.9"}, {Type: v1.NodeInternalIP, Address: "FD00::9"},
			{Type: v1.NodeInternalIP, Address: "10.1.0.4"}, {Type: v1.NodeExternalIP, Address: "10.1.0.1"}, {Type: v1.NodeInternalIP, Address: "fd00::5"}}}},
		&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "v4only"}, Status: v1.NodeStatus{Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.1.0.7"}}}},
	)
	sl := func(name string, typ discoveryv1.AddressType, owner string, eps ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
		s := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name,
			Labels: map[string]string{discoveryv1.LabelServiceName: "svc"}}, AddressType: typ, Endpoints: eps}
		if owner != "" {
			s.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Service", Name: "svc", UID: uidOf(owner)}}
		}
		return s
	}
	e := func(node string, ready *bool, addrs ...string) discoveryv1.Endpoint {
		return discoveryv1.Endpoint{Addresses: addrs, NodeName: ptr.To(node), Conditions: discoveryv1.EndpointConditions{Ready: ready}}
	}
	f := informers.NewSharedInformerFactory(cs, 0)
	slices, nodes := f.Discovery().V1().EndpointSlices(), f.Core().V1().Nodes()
	for _, s := range []*discoveryv1.EndpointSlice{
		sl("v4", discoveryv1.AddressTypeIPv4, uidA, e("n1", nil, "10.2.0.5", "fd00:2::5"), e("n1", ptr.To(false), "10.2.0.6"),
			e("v4only", ptr.To(true), "fd00:2::7", "10.2.0.7"), e("gone", nil, "10.2.0.8"), e("n1", nil, "bogus")),
		sl("fqdn", discoveryv1.AddressTypeFQDN, uidA, e("n1", nil, "db.example.com")),
		sl("old", discoveryv1.AddressTypeIPv4, uidB, e("n1", nil, "10.2.0.99")),
		{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "nonode", Labels: map[string]string{discoveryv1.LabelServiceName: "svc"}},
			AddressType: discoveryv1.AddressTypeIPv4, Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.2.0.50"}}}},
	} {
		if err := slices.Informer().GetIndexer().Add(s); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []string{"n1", "v4only"} {
		obj, _ := cs.CoreV1().Nodes().Get(t.Context(), n, metav1.GetOptions{})
		_ = nodes.Informer().GetIndexer().Add(obj)
	}
	got, err := serviceEndpoints("ns", "svc", uidA, listerSlices{slices.Lister()}, nodes.Lister())
	if err != nil {
		t.Fatal(err)
	}
	want := set(k("10.1.0.4", "10.2.0.5"), k("fd00::5", "fd00:2::5"), k("10.1.0.7", "10.2.0.7"))
	if len(got.addrs) != len(want) {
		t.Fatalf("addresses %v, want %v", got.addrs, want)
	}
	for x := range want {
		if _, ok := got.addrs[x]; !ok {
			t.Errorf("missing %v in %v", x, got.addrs)
		}
	}
	if got.unplaced != 3 { // fd00:2::7 (no IPv6 on v4only), 10.2.0.8 (unknown node), bogus
		t.Errorf("unplaced %d, want 3", got.unplaced)
	}
	if _, ok := got.nodes["gone"]; !ok || len(got.nodes) != 3 {
		t.Errorf("nodes %v: an unknown node is remembered for when it comes", got.nodes)
	}
}

// admit never panics, and what it admits is servable: ports in range,
// rules unique by name and by protocol and backend port.
func FuzzAdmit(f *testing.F) {
	f.Add("4", "true", int32(80), "8080", "TCP", int32(443), "", "UDP")
	f.Add("31", "", int32(65535), "http", "SCTP", int32(0), "0", "TCP")
	f.Add(" 10 ", "TRUE", int32(53), "53", "UDP", int32(53), "53", "TCP")
	f.Fuzz(func(t *testing.T, idle, internal string, p1 int32, t1, proto1 string, p2 int32, t2, proto2 string) {
		tp := func(s string) intstr.IntOrString {
			if n, err := strconv.Atoi(s); err == nil && n >= 0 && n < 1<<31 {
				return intstr.FromInt32(int32(n))
			}
			return intstr.FromString(s)
		}
		svc := lbService(func(s *v1.Service) {
			s.Annotations = map[string]string{annotations.KeyTCPIdleTimeout: idle, annotations.KeyInternal: internal}
			s.Spec.Ports = []v1.ServicePort{
				{Port: p1, TargetPort: tp(t1), Protocol: v1.Protocol(proto1)},
				{Port: p2, TargetPort: tp(t2), Protocol: v1.Protocol(proto2)},
			}
		})
		spec, rej := admit(svc)
		if (spec == nil) == (rej == nil) {
			t.Fatalf("admit = %v, %v", spec, rej)
		}
		if rej != nil {
			if rej.reason == "" || rej.message == "" {
				t.Fatalf("refusal without reason or message: %+v", rej)
			}
			return
		}
		if spec.idle < minIdleTimeout || spec.idle > maxIdleTimeout {
			t.Fatalf("idle %d", spec.idle)
		}
		names, backends := map[string]bool{}, map[string]bool{}
		for _, r := range spec.rules {
			key := string(r.protocol) + "/" + strconv.Itoa(int(r.backendPort))
			if names[r.name] || backends[key] || r.port < 1 || r.port > 65534 || r.backendPort < 1 || r.backendPort > 65535 {
				t.Fatalf("unservable rules %+v", spec.rules)
			}
			names[r.name], backends[key] = true, true
		}
	})
}
