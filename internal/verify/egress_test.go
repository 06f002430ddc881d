package verify

import (
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/azlb/azlb/internal/config"
	"github.com/azlb/azlb/internal/testutil"
)

// Egress identities: a complete one is clean; a missing NAT gateway, a
// detached one, a pod without finalizer or address, and the leftovers of
// an identity without pods are findings; default-natgw is not judged.
func TestEgress(t *testing.T) {
	cfg := baseConfig()
	cfg.ServiceGatewayEnabled, cfg.LoadBalancerSKU, cfg.LoadBalancerBackendPoolConfigurationType = true, "service", config.BackendPoolPodIP
	net := "/subscriptions/" + sub + "/resourceGroups/rg/providers/Microsoft.Network/"
	tags := func(id string) map[string]*string {
		return map[string]*string{"k8s-azure-cluster-name": ptr.To("kubernetes"), egressTag: ptr.To(id)}
	}
	pip := func(id string) *armnetwork.PublicIPAddress {
		return &armnetwork.PublicIPAddress{Name: ptr.To(id + "-pip"), ID: ptr.To(net + "publicIPAddresses/" + id + "-pip"), Tags: tags(id),
			SKU: &armnetwork.PublicIPAddressSKU{Name: ptr.To(armnetwork.PublicIPAddressSKUNameStandardV2)}}
	}
	nat := func(id string) *armnetwork.NatGateway {
		return &armnetwork.NatGateway{Name: ptr.To(id), ID: ptr.To(net + "natGateways/" + id), Tags: tags(id),
			SKU: &armnetwork.NatGatewaySKU{Name: ptr.To(armnetwork.NatGatewaySKUNameStandardV2)},
			Properties: &armnetwork.NatGatewayPropertiesFormat{PublicIPAddresses: []*armnetwork.SubResource{{ID: ptr.To(net + "publicIPAddresses/" + id + "-pip")}},
				ServiceGateway: &armnetwork.SubResource{ID: ptr.To(net + "serviceGateways/servicegateway")}}}
	}
	outbound := func(id string) *armnetwork.ServiceGatewayService {
		return &armnetwork.ServiceGatewayService{Name: ptr.To(id), Properties: &armnetwork.ServiceGatewayServicePropertiesFormat{
			ServiceType: ptr.To(armnetwork.ServiceTypeOutbound), PublicNatGatewayID: ptr.To(net + "natGateways/" + id)}}
	}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "p1", Labels: map[string]string{egressLabel: "team-a"}, Finalizers: []string{egressFinalizer}},
		Spec: v1.PodSpec{NodeName: "n1"}, Status: v1.PodStatus{Phase: v1.PodRunning, PodIPs: []v1.PodIP{{IP: "10.244.0.7"}}}}
	s := &Snapshot{
		Config:    cfg,
		Nodes:     []*v1.Node{testutil.Node("n1", testutil.InternalIPs("10.0.0.1"))},
		PublicIPs: []*armnetwork.PublicIPAddress{pip("team-a")},
		Gateway: &Gateway{
			Services: []*armnetwork.ServiceGatewayService{outbound("team-a"),
				{Name: ptr.To("default-natgw"), Properties: &armnetwork.ServiceGatewayServicePropertiesFormat{ServiceType: ptr.To(armnetwork.ServiceTypeOutbound)}}},
			Locations: []*armnetwork.ServiceGatewayAddressLocationResponse{{AddressLocation: ptr.To("10.0.0.1"),
				Addresses: []*armnetwork.ServiceGatewayAddress{{Address: ptr.To("10.244.0.7"), Services: []*string{ptr.To("team-a"), ptr.To("default-natgw")}}}}},
			EgressPods:  []*v1.Pod{pod},
			NatGateways: []*armnetwork.NatGateway{nat("team-a")},
		},
	}
	if r := Check(s); !r.Clean() {
		t.Fatalf("%s", findings(r))
	}
	s.Gateway.NatGateways[0].Properties.ServiceGateway = nil
	pod.Finalizers = nil
	s.Gateway.Locations[0].Addresses[0].Services = []*string{ptr.To("default-natgw")}
	// An identity without pods left behind.
	s.PublicIPs = append(s.PublicIPs, pip("gone"))
	s.Gateway.NatGateways = append(s.Gateway.NatGateways, nat("gone"))
	s.Gateway.Services = append(s.Gateway.Services, outbound("gone"))
	r := Check(s)
	got := findings(r)
	for _, want := range []string{"NAT gateway team-a: is not attached", "pod default/p1: has no finalizer", "address 10.0.0.1 10.244.0.7 names egress identity absent, want team-a",
		"NAT gateway gone: belongs to egress identity gone", "public IP gone-pip: belongs to egress identity gone", "holds Outbound service gone"} {
		if !strings.Contains(got, want) {
			t.Errorf("findings lack %q:\n%s", want, got)
		}
	}
	if len(r.Findings) != 6 {
		t.Errorf("%d findings:\n%s", len(r.Findings), got)
	}
}
