package servicegateway

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/azlb/azlb/internal/names"
	"github.com/azlb/azlb/internal/testutil"
)

// kubeWrites counts the writes the clientset received.
func (h *harness) kubeWrites() []string {
	var out []string
	for _, a := range h.cs.Actions() {
		switch a.GetVerb() {
		case "create", "update", "patch", "delete":
			out = append(out, a.GetVerb()+" "+a.GetResource().Resource)
		}
	}
	return out
}

// seedDefaultNAT registers the RP's outbound default service and maps a
// pod to it.
func (h *harness) seedDefaultNAT(loc, addr string) {
	h.arm.SeedGatewayService(&armnetwork.ServiceGatewayService{Name: to.Ptr(names.DefaultOutboundService),
		Properties: &armnetwork.ServiceGatewayServicePropertiesFormat{ServiceType: to.Ptr(armnetwork.ServiceTypeOutbound), IsDefault: to.Ptr(true),
			PublicNatGatewayID: to.Ptr("/subscriptions/sub/resourceGroups/rg/providers/Microsoft.Network/natGateways/default-natgw")}})
	h.arm.SeedAddress(loc, addr, names.DefaultOutboundService)
}

// B28, bug 16, 41: a restart of an unchanged cluster (IPv4 and IPv6
// Services, dual-stack nodes, a pod shared by two Services, one shared with
// the outbound default) writes nothing to Azure or Kubernetes.
func TestRestartUnchangedWritesNothing(t *testing.T) {
	h := newHarness(t)
	h.seedDefaultNAT("10.1.0.4", "10.2.0.2")
	h.start()
	h.node("n1", "10.1.0.4", "fd00::4")
	h.node("n2", "10.1.0.9", "10.1.0.5", "fd00::5")
	a, b := h.service("default", "a"), h.service("default", "b")
	v6 := h.service("other", "v6", func(s *v1.Service) { s.Spec.IPFamilies = []v1.IPFamily{v1.IPv6Protocol} })
	h.slice(a, "x", discoveryv1.AddressTypeIPv4, readyOn("n1", "10.2.0.1"), readyOn("n1", "10.2.0.2"), readyOn("n2", "10.2.0.3"))
	h.slice(b, "x", discoveryv1.AddressTypeIPv4, readyOn("n1", "10.2.0.1"))
	h.slice(v6, "x", discoveryv1.AddressTypeIPv6, readyOn("n2", "fd00:2::3"))
	for _, s := range []*v1.Service{a, b, v6} {
		if err := h.ensure(s); err != nil {
			t.Fatal(err)
		}
		h.waitReady(s)
	}
	ab := strings.Join(slices.Sorted(slices.Values([]string{uid(a), uid(b)})), ",")
	natA := strings.Join(slices.Sorted(slices.Values([]string{uid(a), names.DefaultOutboundService})), ",")
	h.waitAddresses("10.1.0.4: 10.2.0.1="+ab+" 10.2.0.2="+natA, "10.1.0.5: 10.2.0.3="+uid(a), "fd00::5: fd00:2::3="+uid(v6))
	h.idle()
	h.arm.ResetCalls()
	h.cs.ClearActions()
	h.restart()
	h.idle()
	if w := writes(h.arm.Calls()); len(w) != 0 {
		t.Errorf("the restart wrote to Azure: %v", ops(w))
	}
	if w := h.kubeWrites(); len(w) != 0 {
		t.Errorf("the restart wrote to Kubernetes: %v", w)
	}
	if got := h.arm.Calls(); len(got) != 4 {
		t.Errorf("the restart read %v; want the gateway's services and locations, the load balancers and the public IPs", ops(got))
	}
}

// B29, bug 46: what changed while azlb was down is done at start: a new
// Service provisioned, a deleted one torn down, a port change applied, a
// gone endpoint removed, a lost ingress IP written back (after a transient
// failure).
func TestRestartCatchesUp(t *testing.T) {
	h := newHarness(t)
	h.start()
	h.node("n1", "10.1.0.4")
	keep, gone, changed := h.service("default", "keep"), h.service("default", "gone"), h.service("default", "changed")
	h.slice(keep, "x", discoveryv1.AddressTypeIPv4, readyOn("n1", "10.2.0.1"), readyOn("n1", "10.2.0.2"))
	for _, s := range []*v1.Service{keep, gone, changed} {
		if err := h.ensure(s); err != nil {
			t.Fatal(err)
		}
		h.waitReady(s)
	}
	h.waitAddresses("10.1.0.4: 10.2.0.1=" + uid(keep) + " 10.2.0.2=" + uid(keep))
	h.idle()
	h.shutdown()

	ctx := context.Background()
	fresh := h.service("default", "fresh")
	cur := h.get(gone)
	now := metav1.Now()
	cur.DeletionTimestamp = &now
	if _, err := h.cs.CoreV1().Services("default").Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	cur = h.get(changed)
	cur.Spec.Ports[0].Port = 8443
	if _, err := h.cs.CoreV1().Services("default").Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.slice(keep, "x", discoveryv1.AddressTypeIPv4, readyOn("n1", "10.2.0.1"))
	cur = h.get(keep)
	cur.Status.LoadBalancer.Ingress = nil
	if _, err := h.cs.CoreV1().Services("default").UpdateStatus(ctx, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	var failPatch atomic.Bool
	failPatch.Store(true)
	h.cs.PrependReactor("patch", "services", func(k8stesting.Action) (bool, runtime.Object, error) {
		if failPatch.CompareAndSwap(true, false) {
			return true, nil, errors.New("the server is currently unable to handle the request")
		}
		return false, nil, nil
	})

	h.lb = NewBalancer()
	h.start()
	h.waitReady(fresh)
	h.waitGone(gone)
	h.waitAddresses("10.1.0.4: 10.2.0.1=" + uid(keep))
	testutil.Poll(t, waitFor, "port change", func() bool {
		lb := h.arm.LB(uid(changed))
		return lb != nil && *lb.Properties.LoadBalancingRules[0].Name == "rule-tcp-8443"
	})
	h.stepUntil(time.Second, "ingress back-filled", func() bool {
		c := h.get(keep)
		return len(c.Status.LoadBalancer.Ingress) == 1
	})
}

// B30, B31, bug 42, 43: start-up finishes a create that crashed after the
// load balancer, removes what azlb made for Services that are gone (and a
// stuck finalizer with it), and never touches what is not azlb's.
func TestRestartCompletesAndCleansUp(t *testing.T) {
	h := newHarness(t)
	h.seedDefaultNAT("10.1.0.4", "10.2.0.7")
	ctx := context.Background()
	pipOf := func(u string, tagged bool) *armnetwork.PublicIPAddress {
		p := &armnetwork.PublicIPAddress{Name: to.Ptr(u + "-pip"), Properties: &armnetwork.PublicIPAddressPropertiesFormat{
			PublicIPAddressVersion: to.Ptr(armnetwork.IPVersionIPv4)}}
		if tagged {
			p.Tags = map[string]*string{names.TagClusterName: to.Ptr("kubernetes")}
		}
		return p
	}
	// A Service whose create crashed after its load balancer.
	crashed := h.service("default", "crashed")
	h.arm.SeedPublicIP(pipOf(uid(crashed), true))
	pip := h.arm.PublicIP(uid(crashed) + "-pip")
	e := &Controller{cfg: h.cfg, store: newTestStore(t, h)}
	spec, _ := admit(crashed)
	lb := e.desiredLB(uid(crashed), spec, *pip.ID)
	lb.Name = to.Ptr(uid(crashed))
	lb.Tags = map[string]*string{names.TagClusterName: to.Ptr("kubernetes")}
	h.arm.Seed(lb)
	cur := h.get(crashed)
	cur.Finalizers = []string{Finalizer, LoadBalancerCleanupFinalizer}
	if _, err := h.cs.CoreV1().Services("default").Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Orphans: a load balancer and public IP of a Service that is gone, a
	// registration (with an address) of another.
	const orphan1, orphan2 = "0e000000-0000-4000-8000-000000000001", "0e000000-0000-4000-8000-000000000002"
	h.arm.SeedPublicIP(pipOf(orphan1, true))
	olb := e.desiredLB(orphan1, spec, *h.arm.PublicIP(orphan1 + "-pip").ID)
	olb.Name, olb.Tags = to.Ptr(orphan1), map[string]*string{names.TagClusterName: to.Ptr("kubernetes")}
	h.arm.Seed(olb)
	h.arm.Seed(&armnetwork.LoadBalancer{Name: to.Ptr(orphan2), SKU: &armnetwork.LoadBalancerSKU{Name: to.Ptr(SKUService)},
		Properties: &armnetwork.LoadBalancerPropertiesFormat{BackendAddressPools: []*armnetwork.BackendAddressPool{{Name: to.Ptr(orphan2)}}}})
	h.arm.SeedGatewayService(&armnetwork.ServiceGatewayService{Name: to.Ptr(orphan2), Properties: &armnetwork.ServiceGatewayServicePropertiesFormat{
		ServiceType: to.Ptr(armnetwork.ServiceTypeInbound), LoadBalancerBackendPools: []*armnetwork.BackendAddressPool{{ID: to.Ptr(e.poolID(orphan2))}}}})
	h.arm.SeedAddress("10.1.0.4", "10.2.0.9", orphan2)
	// Not azlb's: a Standard load balancer, a UID-named public IP without
	// the cluster's tag.
	const foreign = "0f000000-0000-4000-8000-000000000003"
	h.arm.Seed(&armnetwork.LoadBalancer{Name: to.Ptr("kubernetes"), SKU: &armnetwork.LoadBalancerSKU{Name: to.Ptr(armnetwork.LoadBalancerSKUNameStandard)}})
	h.arm.SeedPublicIP(pipOf(foreign, false))
	// A Service stuck terminating with azlb's finalizer and nothing in
	// Azure, and one with only its public IP left.
	stuck := h.service("default", "stuck", func(s *v1.Service) {
		s.Finalizers = []string{Finalizer}
		now := metav1.Now()
		s.DeletionTimestamp = &now
	})
	pipOnly := h.service("default", "pip-only", func(s *v1.Service) {
		s.Finalizers = []string{Finalizer}
		now := metav1.Now()
		s.DeletionTimestamp = &now
	})
	h.arm.SeedPublicIP(pipOf(uid(pipOnly), true))

	h.start()
	h.waitReady(crashed)
	h.waitGone(stuck)
	h.waitGone(pipOnly)
	testutil.Poll(t, waitFor, "orphans removed", func() bool {
		return h.arm.LB(orphan1) == nil && h.arm.PublicIP(orphan1+"-pip") == nil && h.arm.LB(orphan2) == nil &&
			h.arm.GatewayService(orphan2) == nil
	})
	h.waitAddresses("10.1.0.4: 10.2.0.7=" + names.DefaultOutboundService)
	h.idle()
	for _, c := range writes(h.arm.Calls()) {
		if c.LB == uid(crashed) || c.Name == uid(crashed)+"-pip" {
			t.Errorf("finishing the crashed create rewrote %s %s%s", c.Op, c.LB, c.Name)
		}
	}
	if h.arm.LB("kubernetes") == nil || h.arm.PublicIP(foreign+"-pip") == nil || h.arm.GatewayService(names.DefaultOutboundService) == nil {
		t.Error("start-up removed what is not azlb's")
	}
	for _, c := range h.arm.Calls() {
		if c.Op == "sgw.update_services" {
			for _, r := range c.Body.(*armnetwork.ServiceGatewayUpdateServicesRequest).ServiceRequests {
				if *r.Service.Name == names.DefaultOutboundService {
					t.Errorf("touched %s", names.DefaultOutboundService)
				}
			}
		}
	}
}

// B6, bug 44: start-up applies the runtime filters: a Service of another
// load balancer class is not azlb's (its resources go); a Service admission
// refuses keeps its live load balancer and addresses.
func TestRestartFilters(t *testing.T) {
	h := newHarness(t)
	h.start()
	h.node("n1", "10.1.0.4")
	classed, refused := h.service("default", "classed"), h.service("default", "refused")
	h.slice(refused, "x", discoveryv1.AddressTypeIPv4, readyOn("n1", "10.2.0.1"))
	for _, s := range []*v1.Service{classed, refused} {
		if err := h.ensure(s); err != nil {
			t.Fatal(err)
		}
		h.waitReady(s)
	}
	h.idle()
	h.shutdown()
	ctx := context.Background()
	cur := h.get(classed)
	cur.Spec.LoadBalancerClass = ptr.To("example.com/other")
	if _, err := h.cs.CoreV1().Services("default").Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	cur = h.get(refused)
	cur.Spec.SessionAffinity = v1.ServiceAffinityClientIP
	if _, err := h.cs.CoreV1().Services("default").Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.arm.ResetCalls()
	h.lb = NewBalancer()
	h.start()
	testutil.Poll(t, waitFor, "other class torn down", func() bool { return h.arm.LB(uid(classed)) == nil && h.arm.GatewayService(uid(classed)) == nil })
	h.idle()
	if h.arm.LB(uid(refused)) == nil || len(h.arm.Addresses()) != 1 {
		t.Error("a refused Service lost its live load balancer or addresses")
	}
	if len(h.events.Find("default/refused", ReasonUnsupportedAffinity)) == 0 {
		t.Error("no event for the refused Service")
	}
	h.slice(refused, "x", discoveryv1.AddressTypeIPv4, readyOn("n1", "10.2.0.1"), readyOn("n1", "10.2.0.2"))
	h.waitAddresses("10.1.0.4: 10.2.0.1=" + uid(refused) + " 10.2.0.2=" + uid(refused))
}

// B3, bug 47: without the gateway, or with a service of a type azlb does
// not know, the engine does not start (and writes nothing); it keeps trying
// and starts once that is fixed.
func TestInitRetriesUntilTheGatewayMakesSense(t *testing.T) {
	h := newHarness(t)
	h.arm.SeedGatewayService(&armnetwork.ServiceGatewayService{Name: to.Ptr(uidA), Properties: &armnetwork.ServiceGatewayServicePropertiesFormat{
		ServiceType: to.Ptr(armnetwork.ServiceType("Sideways"))}})
	var missing atomic.Bool
	missing.Store(true)
	h.setFail(func(c testutil.Call) error {
		if c.Op == "sgw.services" && missing.Load() {
			return testutil.RespErr(http.StatusNotFound, "ResourceNotFound")
		}
		return nil
	})
	e := h.run()
	initialized := func() bool {
		select {
		case <-e.Initialized():
			return true
		default:
			return false
		}
	}
	testutil.Poll(t, waitFor, "an attempt", func() bool { return h.arm.Count("sgw.services", "") > 0 })
	missing.Store(false)
	h.stepUntil(time.Minute, "the unknown type met", func() bool { return h.arm.Count("sgw.locations", "") > 0 || h.arm.Count("sgw.services", "") > 1 })
	if initialized() {
		t.Fatal("started with a service of an unknown type")
	}
	if w := writes(h.arm.Calls()); len(w) != 0 {
		t.Fatalf("writes before start: %v", ops(w))
	}
	h.arm.SeedGatewayService(&armnetwork.ServiceGatewayService{Name: to.Ptr(uidA), Properties: &armnetwork.ServiceGatewayServicePropertiesFormat{
		ServiceType: to.Ptr(armnetwork.ServiceTypeInbound)}})
	h.stepUntil(time.Minute, "started", initialized)
}
