package verify

import (
	"fmt"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/azlb/azlb/internal/privatelink"
)

// newcomer is a second LoadBalancer Service with no frontend yet.
func newcomer(ann map[string]string, ports ...v1.ServicePort) *v1.Service {
	return &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "new", UID: types.UID("99999999-2222-3333-4444-555555555555"), Annotations: ann},
		Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, Ports: ports}}
}

func tcp(port int32) v1.ServicePort {
	return v1.ServicePort{Port: port, NodePort: 30000 + port, Protocol: v1.ProtocolTCP}
}

// wantSkipped requires a clean report with the Service's one SKIP line
// naming reason.
func wantSkipped(t *testing.T, s *Snapshot, svc, reason string) {
	t.Helper()
	r := Check(s)
	if !r.Clean() {
		t.Fatalf("findings:\n%s", findings(r))
	}
	n := 0
	for _, f := range r.Skipped {
		if f.Object == "service "+svc {
			n++
			if !strings.Contains(f.Message, "refused ("+reason+")") {
				t.Errorf("skip %q, want the reason %s", f, reason)
			}
		}
	}
	if n != 1 {
		t.Fatalf("skipped %v, want one line for %s", r.Skipped, svc)
	}
}

// Issue 37, item 6: the documented refusals that depend on what Azure
// holds are one SKIP line each, and the report is clean (azlb verify exits
// 0): a port another Service has on the IP asked for, an IP shared on a
// load balancer the Service may not be on, an address no public IP has, no
// configuration that accepts it.
func TestRefusalsAreSkipped(t *testing.T) {
	t.Run("SharedIPPortConflict", func(t *testing.T) {
		s := fixture()
		s.Services[0].Annotations = map[string]string{"service.beta.kubernetes.io/azure-pip-name": "kubernetes-" + webBase}
		s.Services = append(s.Services, newcomer(map[string]string{"service.beta.kubernetes.io/azure-pip-name": "kubernetes-" + webBase}, tcp(80)))
		wantSkipped(t, s, "default/new", "SharedIPPortConflict")
	})
	t.Run("SharedIPPlacementConflict", func(t *testing.T) {
		s := multiFixture()
		s.Namespaces["default"] = map[string]string{"team": "b"}
		// web stays on kubernetes, which it asks for (lb-2's selector
		// matches it, and would come first).
		s.Services[0].Annotations = map[string]string{"service.beta.kubernetes.io/azure-load-balancer-configurations": "kubernetes"}
		s.Services = append(s.Services, newcomer(map[string]string{"service.beta.kubernetes.io/azure-pip-name": "kubernetes-" + webBase,
			"service.beta.kubernetes.io/azure-load-balancer-configurations": "lb-2"}, tcp(8080)))
		wantSkipped(t, s, "default/new", "SharedIPPlacementConflict")
	})
	t.Run("PublicIPNotFound", func(t *testing.T) {
		s := fixture()
		s.Services = append(s.Services, newcomer(map[string]string{"service.beta.kubernetes.io/azure-load-balancer-ipv4": "203.0.113.77"}, tcp(80)))
		wantSkipped(t, s, "default/new", "PublicIPNotFound")
	})
	t.Run("LoadBalancerPlacementFailed", func(t *testing.T) {
		s := multiFixture()
		s.Services = append(s.Services, newcomer(map[string]string{"service.beta.kubernetes.io/azure-load-balancer-configurations": "lb-9"}, tcp(80)))
		wantSkipped(t, s, "default/new", "LoadBalancerPlacementFailed")
	})
	t.Run("UnsupportedProtocol", func(t *testing.T) {
		s := fixture()
		s.Services = append(s.Services, newcomer(nil, tcp(80), v1.ServicePort{Port: 9, NodePort: 30009, Protocol: v1.ProtocolSCTP}))
		wantSkipped(t, s, "default/new", "UnsupportedProtocol")
	})
	// Issue 37, item 1: a Private Link Service asked of a public Service.
	t.Run("InvalidPrivateLinkService", func(t *testing.T) {
		s := fixture()
		s.Services = append(s.Services, newcomer(map[string]string{privatelink.KeyCreate: "true"}, tcp(80)))
		wantSkipped(t, s, "default/new", "InvalidPrivateLinkService")
	})
	t.Run("NAT subnet missing", func(t *testing.T) {
		s := fixture()
		s.Subnets = map[string]*armnetwork.Subnet{lower(subnetIDOf(s.Config, "nowhere")): nil}
		s.Services = append(s.Services, newcomer(map[string]string{privatelink.KeyCreate: "true", "service.beta.kubernetes.io/azure-load-balancer-internal": "true",
			privatelink.KeySubnet: "nowhere"}, tcp(80)))
		wantSkipped(t, s, "default/new", "InvalidPrivateLinkService")
	})
	t.Run("NAT address outside its subnet", func(t *testing.T) {
		s := fixture()
		s.Subnets = map[string]*armnetwork.Subnet{lower(subnetIDOf(s.Config, s.Config.SubnetName)): {
			Properties: &armnetwork.SubnetPropertiesFormat{AddressPrefix: ptr.To("10.0.0.0/24")}}}
		s.Services = append(s.Services, newcomer(map[string]string{privatelink.KeyCreate: "true", "service.beta.kubernetes.io/azure-load-balancer-internal": "true",
			privatelink.KeyIPAddresses: "10.9.0.10"}, tcp(80)))
		wantSkipped(t, s, "default/new", "InvalidPrivateLinkService")
	})
}

// Issue 37, item 3: a Service over the NSG's limits is one SKIP line, not
// one DRIFT line per source range.
func TestNSGLimitRefusalIsOneLine(t *testing.T) {
	s := nsgFixture()
	big := newcomer(nil, tcp(80))
	for i := 0; i < 4001; i++ {
		big.Spec.LoadBalancerSourceRanges = append(big.Spec.LoadBalancerSourceRanges, fmt.Sprintf("10.%d.%d.%d/32", i/16384, i/64%256, i%64*4))
	}
	s.Services = append(s.Services, big)
	wantSkipped(t, s, "default/new", "SecurityRuleLimitExceeded")
}

// Issue 37, item 5: an IPv4-mapped IPv6 range is invalid, so the Service
// fails closed (its valid range allowed, a deny-all on its address), and
// the NSG the controller writes for it is clean.
func TestIPv4MappedRangeFailsClosed(t *testing.T) {
	s := nsgFixture()
	annotate(s, "service.beta.kubernetes.io/azure-allowed-ip-ranges", "127.0.0.3/32,::ffff:127.0.0.0/104")
	setRules(s, allow(allowName("IPv4", "Tcp_127.0.0.3/32_80"), 500, l("127.0.0.3/32"), l("20.0.0.1"), l("80")), denyAll("IPv4", 4095, "20.0.0.1"))
	if r := Check(s); !r.Clean() {
		t.Fatalf("findings:\n%s", findings(r))
	}
}

// Issue 37, item 8: a source-range annotation set to "" fails closed: no
// Internet rule, a deny-all.
func TestBlankRangeAnnotationJudgedClosed(t *testing.T) {
	s := nsgFixture()
	annotate(s, "service.beta.kubernetes.io/azure-allowed-ip-ranges", "")
	setRules(s, denyAll("IPv4", 4095, "20.0.0.1"))
	if r := Check(s); !r.Clean() {
		t.Fatalf("findings:\n%s", findings(r))
	}
	// The Internet rule it had before is wider than its spec now.
	setRules(s, allow(webInternet, 500, l("Internet"), l("20.0.0.1"), l("80")), denyAll("IPv4", 4095, "20.0.0.1"))
	if r := Check(s); r.Clean() {
		t.Fatal("an Internet rule for a Service with a blank range annotation is clean")
	}
}
