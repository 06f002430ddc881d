package servicegateway

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
}

// B5, B7: a refused Service is a Warning event and an error and costs no
// ARM call; a Service being deleted is never provisioned.
func TestAdmissionAndDeletedServices(t *testing.T) {
	h := newHarness(t)
	h.start()
	bad := h.service("default", "sticky", func(s *v1.Service) { s.Spec.SessionAffinity = v1.ServiceAffinityClientIP })
	err := h.ensure(bad)
	if err == nil || !strings.Contains(err.Error(), ReasonUnsupportedAffinity) {
		t.Fatalf("EnsureLoadBalancer = %v", err)
	}
	if got := h.events.Find("default/sticky", ReasonUnsupportedAffinity); len(got) != 1 || got[0].Type != v1.EventTypeWarning {
		t.Errorf("events %v", h.events.All())
	}
	doomed := h.service("default", "doomed")
	cur := h.get(doomed)
	now := metav1.Now()
	cur.DeletionTimestamp = &now
	if _, err := h.lb.EnsureLoadBalancer(context.Background(), "kubernetes", cur, nil); err != nil {
		t.Fatal(err)
	}
	h.idle()
	if calls := h.arm.Calls(); len(writes(calls)) != 0 {
		t.Errorf("ARM writes for refused or deleted Services: %v", ops(calls))
	}
}

// B11: GetLoadBalancer knows tracked Services; UpdateLoadBalancer does
// nothing; before the engine runs every call says it is not initialized.
func TestGetAndUpdateLoadBalancer(t *testing.T) {
	h := newHarness(t)
	svc := &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "b", UID: uidA}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if _, err := h.lb.EnsureLoadBalancer(ctx, "k", svc, nil); !errors.Is(err, ErrNotInitialized) {
		t.Errorf("before start: %v", err)
	}
	h.start()
	s := h.service("default", "web")
	if _, exists, err := h.lb.GetLoadBalancer(context.Background(), "k", s); err != nil || exists {
		t.Errorf("unknown Service: exists %v, %v", exists, err)
	}
	if err := h.ensure(s); err != nil {
		t.Fatal(err)
	}
	h.waitReady(s)
	if _, exists, err := h.lb.GetLoadBalancer(context.Background(), "k", h.get(s)); err != nil || !exists {
		t.Errorf("tracked Service: exists %v, %v", exists, err)
	}
	h.arm.ResetCalls()
	if err := h.lb.UpdateLoadBalancer(context.Background(), "k", h.get(s), nil); err != nil {
		t.Fatal(err)
	}
	if err := h.ensure(s); err != nil { // unchanged
		t.Fatal(err)
	}
	h.idle()
	if calls := h.arm.Calls(); len(calls) != 0 {
		t.Errorf("UpdateLoadBalancer / unchanged Ensure cost %v", ops(calls))
	}
	if name := h.lb.GetLoadBalancerName(context.Background(), "k", s); name == "" {
		t.Error("no name")
	}
}

// B12, bug 9: no address names a Service before its registration has
// succeeded.
func TestNoAddressBeforeRegistration(t *testing.T) {
	h := newHarness(t)
	registering, release := h.holdFirst("sgw.update_services")
	h.start()
	h.node("n1", "10.1.0.4")
	svc := h.service("default", "web")
	h.slice(svc, "a", discoveryv1.AddressTypeIPv4, readyOn("n1", "10.2.0.10"))
	if err := h.ensure(svc); err != nil {
		t.Fatal(err)
	}
	<-registering
	h.slice(svc, "a", discoveryv1.AddressTypeIPv4, readyOn("n1", "10.2.0.10"), readyOn("n1", "10.2.0.11"))
	testutil.Poll(t, waitFor, "endpoints read", func() bool {
		h.engine.mu.Lock()
		defer h.engine.mu.Unlock()
		return len(h.engine.tracker.Wanted(uid(svc))) == 2
	})
	if n := h.arm.Count("sgw.update_locations", ""); n != 0 {
		t.Fatalf("%d address updates before the registration finished", n)
	}
	release()
	h.waitAddresses("10.1.0.4: 10.2.0.10=" + uid(svc) + " 10.2.0.11=" + uid(svc))
}

// B14: changes that arrive while an address update is in flight go in one
// next update, carrying all of them.
func TestBurstCoalesces(t *testing.T) {
	h := newHarness(t)
	h.start()
	h.node("n1", "10.1.0.4")
	svc := h.service("default", "web")
	if err := h.ensure(svc); err != nil {
		t.Fatal(err)
	}
	h.waitReady(svc)
	h.idle()
	inFlight, release := h.holdFirst("sgw.update_locations")
	h.slice(svc, "a", discoveryv1.AddressTypeIPv4, readyOn("n1", "10.2.0.1"))
	<-inFlight
	var eps []ep
	for i := 2; i <= 40; i++ {
		eps = append(eps, readyOn("n1", fmt.Sprintf("10.2.0.%d", i)))
		h.slice(svc, "a", discoveryv1.AddressTypeIPv4, eps...)
	}
	testutil.Poll(t, waitFor, "the burst read", func() bool {
		h.engine.mu.Lock()
		defer h.engine.mu.Unlock()
		return len(h.engine.tracker.Wanted(uid(svc))) == 39
	})
	release()
	var want []string
	for i := 2; i <= 40; i++ {
		want = append(want, fmt.Sprintf("10.2.0.%d=%s", i, uid(svc)))
	}
	slices.Sort(want)
	h.waitAddresses("10.1.0.4: " + strings.Join(want, " "))
	h.idle()
	if n := h.arm.Count("sgw.update_locations", ""); n != 2 {
		t.Errorf("%d address updates for the in-flight one and a burst of 39 changes, want 2", n)
	}
}

// B15, B16, B17, bug 36, 40: pods leave, a pod backs two Services, nodes
// change address, come and go.
func TestEndpointAndNodeChanges(t *testing.T) {
	h := newHarness(t)
	h.start()
	h.node("n1", "10.1.0.4")
	a, b := h.service("default", "a"), h.service("default", "b")
	h.slice(a, "x", discoveryv1.AddressTypeIPv4, readyOn("n1", "10.2.0.1"), readyOn("n1", "10.2.0.2"), readyOn("n2", "10.2.0.3"))
	h.slice(b, "x", discoveryv1.AddressTypeIPv4, readyOn("n1", "10.2.0.2"))
	for _, s := range []*v1.Service{a, b} {
		if err := h.ensure(s); err != nil {
			t.Fatal(err)
		}
	}
	both := strings.Join(slices.Sorted(slices.Values([]string{uid(a), uid(b)})), ",")
	h.waitAddresses("10.1.0.4: 10.2.0.1=" + uid(a) + " 10.2.0.2=" + both)
	// The node n2 arrives: its pod comes in without an EndpointSlice event.
	h.node("n2", "10.1.0.5")
	h.waitAddresses("10.1.0.4: 10.2.0.1="+uid(a)+" 10.2.0.2="+both, "10.1.0.5: 10.2.0.3="+uid(a))
	// A pod goes not-ready; Service b stops using the shared pod.
	h.slice(a, "x", discoveryv1.AddressTypeIPv4, notReadyOn("n1", "10.2.0.1"), readyOn("n1", "10.2.0.2"), readyOn("n2", "10.2.0.3"))
	h.deleteSlice(b, "x")
	h.waitAddresses("10.1.0.4: 10.2.0.2="+uid(a), "10.1.0.5: 10.2.0.3="+uid(a))
	// n2 changes its InternalIP: its pods move.
	n2, _ := h.cs.CoreV1().Nodes().Get(context.Background(), "n2", metav1.GetOptions{})
	n2.Status.Addresses = []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.1.0.6"}}
	if _, err := h.cs.CoreV1().Nodes().Update(context.Background(), n2, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.waitAddresses("10.1.0.4: 10.2.0.2="+uid(a), "10.1.0.6: 10.2.0.3="+uid(a))
	// n2 is deleted: its pods drain, and the location with them.
	if err := h.cs.CoreV1().Nodes().Delete(context.Background(), "n2", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	h.waitAddresses("10.1.0.4: 10.2.0.2=" + uid(a))
	last := h.locationRequests()
	if l := last[len(last)-1].AddressLocations; len(l) != 1 || *l[0].AddressLocation != "10.1.0.6" || l[0].Addresses == nil || len(l[0].Addresses) != 0 {
		t.Errorf("a node with no pods left goes with addresses []: %+v", l)
	}
}

// B18, bug 26, 41: an IPv6 Service on dual-stack nodes; NRP answers
// upper-case; a restart finds everything in sync.
func TestIPv6Service(t *testing.T) {
	h := newHarness(t)
	h.start()
	h.node("n1", "10.1.0.4", "fd00::4")
	svc := h.service("default", "v6", func(s *v1.Service) { s.Spec.IPFamilies = []v1.IPFamily{v1.IPv6Protocol} })
	h.slice(svc, "v6", discoveryv1.AddressTypeIPv6, readyOn("n1", "FD00:2::A"))
	h.slice(svc, "v4", discoveryv1.AddressTypeIPv4, readyOn("n1", "10.2.0.10"))
	if err := h.ensure(svc); err != nil {
		t.Fatal(err)
	}
	ip := h.waitReady(svc)
	if !strings.Contains(ip, ":") {
		t.Errorf("ingress %s is not IPv6", ip)
	}
	h.waitAddresses("10.1.0.4: 10.2.0.10="+uid(svc), "fd00::4: fd00:2::a="+uid(svc))
	h.idle()
	h.arm.ResetCalls()
	h.restart()
	h.idle()
	if w := writes(h.arm.Calls()); len(w) != 0 {
		t.Errorf("restart wrote %v", ops(w))
	}
}

// Bug 5, 40: endpoints that come and go while the Service is being created
// never reach the gateway, and a later re-read (a node event) does not
// bring back an address that was removed.
func TestEndpointsDuringCreate(t *testing.T) {
	h := newHarness(t)
	registering, release := h.holdFirst("sgw.update_services")
	h.start()
	h.node("n1", "10.1.0.4")
	svc := h.service("default", "web")
	h.slice(svc, "a", discoveryv1.AddressTypeIPv4, readyOn("n1", "10.2.0.1"))
	if err := h.ensure(svc); err != nil {
		t.Fatal(err)
	}
	<-registering
	h.slice(svc, "a", discoveryv1.AddressTypeIPv4, readyOn("n1", "10.2.0.1"), readyOn("n1", "10.2.0.2"))
	h.slice(svc, "a", discoveryv1.AddressTypeIPv4, readyOn("n1", "10.2.0.1"))
	// The informer has the last version and the engine has read it.
	testutil.Poll(t, waitFor, "last endpoints read", func() bool {
		s, err := h.engine.slices.EndpointSlices("default").Get("web-a")
		if err != nil || len(s.Endpoints) != 1 {
			return false
		}
		h.engine.mu.Lock()
		defer h.engine.mu.Unlock()
		return len(h.engine.tracker.Wanted(uid(svc))) == 1
	})
	release()
	h.waitAddresses("10.1.0.4: 10.2.0.1=" + uid(svc))
	h.idle()
	// A node event re-reads the Service's endpoints: nothing changes.
	n, _ := h.cs.CoreV1().Nodes().Get(context.Background(), "n1", metav1.GetOptions{})
	n.Labels = map[string]string{"touched": "yes"}
	n.Status.Addresses = append(n.Status.Addresses, v1.NodeAddress{Type: v1.NodeHostName, Address: "n1"})
	if _, err := h.cs.CoreV1().Nodes().Update(context.Background(), n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.idle()
	for _, r := range h.locationRequests() {
		for _, l := range r.AddressLocations {
			for _, a := range l.Addresses {
				if *a.Address == "10.2.0.2" {
					t.Errorf("an endpoint that came and went during the create was sent: %+v", r)
				}
			}
		}
	}
	h.waitAddresses("10.1.0.4: 10.2.0.1=" + uid(svc))
}

// Bug 45: a Service whose operation keeps failing does not hold up the
// start of the others.
func TestFailingServiceDoesNotBlockStart(t *testing.T) {
	h := newHarness(t)
	h.start()
	h.setFail(func(c testutil.Call) error {
		if c.Op == "pip.put" {
			return testutil.RespErr(500, "InternalServerError")
		}
		return nil
	})
	bad := h.service("default", "bad")
	if err := h.ensure(bad); err != nil {
		t.Fatal(err)
	}
	testutil.Poll(t, waitFor, "failed once", func() bool { return h.arm.Count("pip.put", "") > 0 })
	h.restart() // waits for initialization
	h.setFail(nil)
	good := h.service("default", "good")
	if err := h.ensure(good); err != nil {
		t.Fatal(err)
	}
	h.waitReady(good)
}
