package provider

import (
	"context"
	"sort"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/azlb/azlb/internal/backendpool"
	"github.com/azlb/azlb/internal/config"
)

// setServingSlice replaces the Service's one EndpointSlice: an endpoint per
// node, ready, or terminating and still serving (KEP-1672) for the nodes
// in terminating.
func setServingSlice(t *testing.T, idx cache.Indexer, ns, svc string, ready []string, terminating ...string) {
	t.Helper()
	s := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: svc + "-1",
		Labels: map[string]string{discoveryv1.LabelServiceName: svc}}, AddressType: discoveryv1.AddressTypeIPv4}
	for _, n := range ready {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{"10.244.0.1"}, NodeName: to.Ptr(n),
			Conditions: discoveryv1.EndpointConditions{Ready: to.Ptr(true), Serving: to.Ptr(true), Terminating: to.Ptr(false)}})
	}
	for _, n := range terminating {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{"10.244.0.2"}, NodeName: to.Ptr(n),
			Conditions: discoveryv1.EndpointConditions{Ready: to.Ptr(false), Serving: to.Ptr(true), Terminating: to.Ptr(true)}})
	}
	if err := idx.Update(s); err != nil {
		t.Fatal(err)
	}
}

// entryStates lists a pool's entries as name/adminState, sorted.
func entryStates(pool *armnetwork.BackendAddressPool) string {
	if pool == nil || pool.Properties == nil {
		return "<no pool>"
	}
	var out []string
	for _, e := range pool.Properties.LoadBalancerBackendAddresses {
		out = append(out, ptr.Deref(e.Name, "")+"/"+string(backendpool.AdminStateOf(e)))
	}
	sort.Strings(out)
	return strings.Join(out, ",")
}

func localAPIService() *v1.Service {
	svc := testService("api", "efefefef-0000-0000-0000-000000000029", nil, 8080)
	svc.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
	svc.Spec.HealthCheckNodePort = 32001
	return svc
}

// The Service reconcile (and so the drift pass, and the node sync) fills a
// Local Service's pool by the same rule as the local service updater: a
// node whose endpoints are all terminating but serving stays, Down, while
// another node is ready; it leaves when they are gone. A reconcile never
// puts None back over it.
func TestLocalPoolReconcileKeepsDrainingNodeDown(t *testing.T) {
	h := newHarness(t, func(c *config.Config) {
		c.MultipleStandardLoadBalancerConfigurations = []config.MultipleStandardLoadBalancerConfiguration{{Name: "kubernetes"}}
	})
	idx := newSliceIndex()
	h.p.slices = listerOf(idx)
	ctx := context.Background()
	nodes := []*v1.Node{testNode("n1", "10.240.0.4"), testNode("n2", "10.240.0.5"), testNode("n3", "10.240.0.6")}
	svc := localAPIService()

	setServingSlice(t, idx, "default", "api", []string{"n1", "n2"})
	if _, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", svc, nodes); err != nil {
		t.Fatal(err)
	}
	if got := entryStates(findPool(h.lb(t, "kubernetes"), "default.api")); got != "n1/None,n2/None" {
		t.Fatalf("pool = %s, want n1/None,n2/None", got)
	}

	// n2's pod terminates and still serves; n1 is ready.
	setServingSlice(t, idx, "default", "api", []string{"n1"}, "n2")
	for i := range 2 { // a reconcile, then a second one that must find nothing to do
		before := h.writes()
		if err := h.p.UpdateLoadBalancer(ctx, "kubernetes", svc, nodes); err != nil {
			t.Fatal(err)
		}
		if got := entryStates(findPool(h.lb(t, "kubernetes"), "default.api")); got != "n1/None,n2/Down" {
			t.Fatalf("reconcile %d: pool = %s, want n1/None,n2/Down (the draining node stays, Down)", i+1, got)
		}
		if i == 1 && h.writes() != before {
			t.Errorf("a second reconcile wrote %d times, want 0", h.writes()-before)
		}
	}

	// No endpoint ready at all: the serving-terminating ones take traffic.
	setServingSlice(t, idx, "default", "api", nil, "n1", "n2")
	if err := h.p.UpdateLoadBalancer(ctx, "kubernetes", svc, nodes); err != nil {
		t.Fatal(err)
	}
	if got := entryStates(findPool(h.lb(t, "kubernetes"), "default.api")); got != "n1/None,n2/None" {
		t.Fatalf("no ready endpoint: pool = %s, want n1/None,n2/None", got)
	}

	// n3 ready, n2's endpoint gone: n2 leaves, n1 drains.
	setServingSlice(t, idx, "default", "api", []string{"n3"}, "n1")
	if err := h.p.UpdateLoadBalancer(ctx, "kubernetes", svc, nodes); err != nil {
		t.Fatal(err)
	}
	if got := entryStates(findPool(h.lb(t, "kubernetes"), "default.api")); got != "n1/Down,n3/None" {
		t.Fatalf("pool = %s, want n1/Down,n3/None", got)
	}
}

// With enableLoadBalancerAdminState=false no Down is written: a draining
// node leaves the pool, as the updater does.
func TestLocalPoolReconcileAdminStateOffDropsDrainingNode(t *testing.T) {
	h := newHarness(t, func(c *config.Config) {
		c.MultipleStandardLoadBalancerConfigurations = []config.MultipleStandardLoadBalancerConfiguration{{Name: "kubernetes"}}
		c.EnableLoadBalancerAdminState = to.Ptr(false)
	})
	idx := newSliceIndex()
	h.p.slices = listerOf(idx)
	nodes := []*v1.Node{testNode("n1", "10.240.0.4"), testNode("n2", "10.240.0.5")}
	setServingSlice(t, idx, "default", "api", []string{"n1"}, "n2")
	if _, err := h.p.EnsureLoadBalancer(context.Background(), "kubernetes", localAPIService(), nodes); err != nil {
		t.Fatal(err)
	}
	if got := entryStates(findPool(h.lb(t, "kubernetes"), "default.api")); got != "n1/None" {
		t.Fatalf("pool = %s, want n1/None", got)
	}
}
