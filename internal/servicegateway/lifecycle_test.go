package servicegateway

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"

	"github.com/azlb/azlb/internal/testutil"
)

// B8, B9, B10, B12, B13: a Service gets its public IP, load balancer and
// registration in that order, finalizers first; its ready endpoints are
// registered under their nodes; its ingress IP is written.
func TestCreateInOrderThenAddresses(t *testing.T) {
	h := newHarness(t)
	h.start()
	h.node("n1", "10.1.0.4")
	h.node("n2", "10.1.0.5")
	svc := h.service("default", "web")
	h.slice(svc, "a", discoveryv1.AddressTypeIPv4, readyOn("n1", "10.2.0.10"), readyOn("n2", "10.2.0.11"), notReadyOn("n2", "10.2.0.12"))
	if err := h.ensure(svc); err != nil {
		t.Fatal(err)
	}
	ip := h.waitReady(svc)
	h.waitAddresses("10.1.0.4: 10.2.0.10="+uid(svc), "10.1.0.5: 10.2.0.11="+uid(svc))

	got := ops(writes(h.arm.Calls()))
	want := []string{"pip.put", "lb.put", "sgw.update_services", "sgw.update_locations"}
	if !slices.Equal(got, want) {
		t.Fatalf("writes %v, want %v", got, want)
	}
	cur := h.get(svc)
	if !slices.Contains(cur.Finalizers, Finalizer) || !slices.Contains(cur.Finalizers, LoadBalancerCleanupFinalizer) {
		t.Errorf("finalizers %v", cur.Finalizers)
	}
	if pip := h.arm.PublicIP(uid(svc) + "-pip"); pip == nil || *pip.Properties.IPAddress != ip {
		t.Errorf("ingress IP %s is not the public IP %+v", ip, pip)
	}
	lb := h.arm.LB(uid(svc))
	if lb == nil || *lb.SKU.Name != "Service" || *lb.Properties.Scope != armnetwork.LoadBalancerScopePublic ||
		len(lb.Properties.Probes) != 0 || len(lb.Properties.LoadBalancingRules) != 1 {
		t.Fatalf("load balancer %+v", lb)
	}
	r := lb.Properties.LoadBalancingRules[0]
	if *r.Name != "rule-tcp-80" || *r.Properties.FrontendPort != 80 || *r.Properties.BackendPort != 8080 ||
		*r.Properties.EnableFloatingIP || !*r.Properties.EnableTCPReset || *r.Properties.IdleTimeoutInMinutes != 4 {
		t.Errorf("rule %+v", r.Properties)
	}
	reg := h.arm.GatewayService(uid(svc))
	if *reg.Properties.ServiceType != armnetwork.ServiceTypeInbound || len(reg.Properties.LoadBalancerBackendPools) != 1 ||
		!strings.HasSuffix(*reg.Properties.LoadBalancerBackendPools[0].ID, "/loadBalancers/"+uid(svc)+"/backendAddressPools/"+uid(svc)) ||
		!strings.HasSuffix(*reg.Properties.LoadBalancerBackendPools[0].Properties.VirtualNetwork.ID, "/resourceGroups/rg/providers/Microsoft.Network/virtualNetworks/vnet") {
		t.Errorf("registration %+v", reg.Properties)
	}
	// The one address update: PartialUpdate, new locations FullUpdate.
	reqs := h.locationRequests()
	if len(reqs) != 1 || *reqs[0].Action != armnetwork.UpdateActionPartialUpdate || len(reqs[0].AddressLocations) != 2 ||
		*reqs[0].AddressLocations[0].AddressUpdateAction != armnetwork.AddressUpdateActionFullUpdate {
		t.Errorf("address requests %+v", reqs)
	}
	_ = testutil.Call{}
	_ = ptr.To(1)
	_ = context.Background()
	_ = v1.ProtocolTCP
}
