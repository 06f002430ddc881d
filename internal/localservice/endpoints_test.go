package localservice

import (
	"context"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
)

func TestReadyEndpointNodes(t *testing.T) {
	ep := func(node *string, ready *bool) discoveryv1.Endpoint {
		return discoveryv1.Endpoint{Addresses: []string{"10.244.0.1"}, NodeName: node, Conditions: discoveryv1.EndpointConditions{Ready: ready}}
	}
	slices := []*discoveryv1.EndpointSlice{
		{Endpoints: []discoveryv1.Endpoint{ep(to.Ptr("n1"), to.Ptr(true)), ep(to.Ptr("n2"), to.Ptr(false)), ep(nil, to.Ptr(true))}},
		nil,
		{Endpoints: []discoveryv1.Endpoint{ep(to.Ptr("n3"), nil), ep(to.Ptr(""), nil), ep(to.Ptr("n1"), to.Ptr(true))}},
	}
	if got := sets.List(ReadyEndpointNodes(slices)); strings.Join(got, ",") != "n1,n3" {
		t.Fatalf("ready nodes = %v, want n1,n3 (not-ready n2 out, unset readiness counts as ready)", got)
	}
}

func TestEndpointNodesFromAllSlicesOfTheService(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	h.setSlice("default", "web", "web-a", "n1")
	h.setSlice("default", "web", "web-b", "n2", "n3")
	h.setSlice("default", "api", "api-a", "n4") // another Service
	h.setSlice("other", "web", "web-a", "n5")   // same name, other namespace
	svc := &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"}}
	h.eventually("slices listed", func() bool {
		n, err := h.u.EndpointNodes(svc)
		return err == nil && n.Len() == 3
	})
	got, _ := h.u.EndpointNodes(svc)
	if strings.Join(sets.List(got), ",") != "n1,n2,n3" {
		t.Fatalf("EndpointNodes = %v", sets.List(got))
	}
	if _, err := h.u.EndpointNodes(nil); err == nil {
		t.Fatal("EndpointNodes(nil) did not fail")
	}
}

func TestEndpointNodesFailsBeforeSync(t *testing.T) {
	factory := informers.NewSharedInformerFactory(fake.NewClientset(), 0)
	u, err := NewUpdater(Options{
		Lock: &testLock{}, Pools: &hookedBackend{}, VirtualNetworkID: "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/virtualNetworks/v",
		Nodes: factory.Core().V1().Nodes(), Services: factory.Core().V1().Services(),
		EndpointSlices: factory.Discovery().V1().EndpointSlices(),
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = u.EndpointNodes(&v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"}})
	if err == nil || !strings.Contains(err.Error(), "default/web") || !strings.Contains(err.Error(), "not synced") {
		t.Fatalf("EndpointNodes before sync: err = %v; want a not-synced error naming the Service", err)
	}
	// Run refuses to start when the informers never sync.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := u.Run(ctx); err == nil {
		t.Fatal("Run without synced informers returned nil")
	}
}

func TestSliceEventsQueueDesiredState(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	h.addService("default", "web")
	h.addService("default", "api")
	h.addService("default", "dual")
	web, api, dual := "default/web", "default/api", "default/dual"
	h.register(web, testLB)
	h.register(api, testLB)
	h.register(dual, "Other-LB", v1.IPv4Protocol, v1.IPv6Protocol)

	// An unregistered Service is ignored; events are handled in order, so
	// once the later event is queued the earlier one was handled.
	h.setSlice("default", "cluster-svc", "cluster-svc-a", "n1")
	h.setSlice("default", "web", "web-a", "n1")
	h.setSlice("default", "web", "web-b", "n2")
	h.waitQueued(web, "n1", "n2")
	if op := h.queued("default/cluster-svc", "default-cluster-svc"); op != nil {
		t.Fatalf("unregistered Service queued: %v", op)
	}

	// Deleting a slice queues the remaining endpoints.
	if err := h.kube.DiscoveryV1().EndpointSlices("default").Delete(h.ctx, "web-a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	h.waitQueued(web, "n2")

	// A slice relabelled from web to api: both Services are queued again.
	s, err := h.kube.DiscoveryV1().EndpointSlices("default").Get(h.ctx, "web-b", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.Labels[discoveryv1.LabelServiceName] = "api"
	if _, err := h.kube.DiscoveryV1().EndpointSlices("default").Update(h.ctx, s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.waitQueued(api, "n2")
	h.waitQueued(web) // no endpoints left
	if got := h.queueKeys(); strings.Join(got, " ") != "default/web@default-web default/api@default-api" {
		t.Fatalf("queue = %v (one entry per Service pool)", got)
	}

	// A dual-stack Service queues both of its pools, on its load balancer.
	h.setSlice("default", "dual", "dual-a", "n3")
	h.eventually("dual queued", func() bool {
		return h.queued(dual, "default-dual") != nil && h.queued(dual, "default-dual-IPv6") != nil
	})
	if op := h.queued(dual, "default-dual-IPv6"); op.lb != "Other-LB" || op.family != v1.IPv6Protocol {
		t.Fatalf("IPv6 entry = %+v", op)
	}

	// Register drops entries the registration no longer covers.
	h.register(dual, "Other-LB", v1.IPv4Protocol)
	if h.queued(dual, "default-dual-IPv6") != nil || h.queued(dual, "default-dual") == nil {
		t.Fatalf("after dropping IPv6: queue = %v", h.queueKeys())
	}
	h.register(dual, "other-lb", v1.IPv4Protocol) // same load balancer, other case
	if h.queued(dual, "default-dual") == nil {
		t.Fatalf("a case change of the load balancer name dropped the entry")
	}
	h.register(dual, "third", v1.IPv4Protocol)
	if h.queued(dual, "default-dual") != nil {
		t.Fatalf("after a move: queue = %v", h.queueKeys())
	}
	if h.u.QueueLen() != 2 {
		t.Fatalf("QueueLen = %d, want 2", h.u.QueueLen())
	}
}
