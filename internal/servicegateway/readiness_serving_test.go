package servicegateway

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"
)

// KEP-1672: a pod in its graceful shutdown (terminating, still serving)
// keeps its address in the gateway, with or without ready endpoints
// elsewhere, until it stops serving or leaves the slice; a terminating
// endpoint that does not say it serves is removed.
func TestRegisteredServingTerminating(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    discoveryv1.EndpointConditions
		want bool
	}{
		{"ready", discoveryv1.EndpointConditions{Ready: ptr.To(true), Serving: ptr.To(true), Terminating: ptr.To(false)}, true},
		{"conditions unset", discoveryv1.EndpointConditions{}, true},
		{"not ready (starting)", discoveryv1.EndpointConditions{Ready: ptr.To(false), Serving: ptr.To(false)}, false},
		{"terminating, serving", discoveryv1.EndpointConditions{Ready: ptr.To(false), Serving: ptr.To(true), Terminating: ptr.To(true)}, true},
		{"terminating, no longer serving", discoveryv1.EndpointConditions{Ready: ptr.To(false), Serving: ptr.To(false), Terminating: ptr.To(true)}, false},
		{"terminating, serving unset", discoveryv1.EndpointConditions{Terminating: ptr.To(true)}, false},
		{"terminating, ready unset, serving unset", discoveryv1.EndpointConditions{Ready: nil, Terminating: ptr.To(true)}, false},
	} {
		if got := registered(tc.c); got != tc.want {
			t.Errorf("%s: registered = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestServiceEndpointsKeepServingTerminating(t *testing.T) {
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: v1.NodeStatus{Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.1.0.4"}}}}
	f := informers.NewSharedInformerFactory(fake.NewClientset(), 0)
	slices, nodes := f.Discovery().V1().EndpointSlices(), f.Core().V1().Nodes()
	_ = nodes.Informer().GetIndexer().Add(node)
	ep := func(addr string, ready, serving, terminating bool) discoveryv1.Endpoint {
		return discoveryv1.Endpoint{Addresses: []string{addr}, NodeName: ptr.To("n1"),
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(ready), Serving: ptr.To(serving), Terminating: ptr.To(terminating)}}
	}
	s := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "s", Labels: map[string]string{discoveryv1.LabelServiceName: "svc"}},
		AddressType: discoveryv1.AddressTypeIPv4, Endpoints: []discoveryv1.Endpoint{
			ep("10.2.0.1", true, true, false),   // ready
			ep("10.2.0.2", false, true, true),   // in its graceful shutdown
			ep("10.2.0.3", false, false, true),  // shutting down, no longer serving
			ep("10.2.0.4", false, false, false), // starting
		}}
	if err := slices.Informer().GetIndexer().Add(s); err != nil {
		t.Fatal(err)
	}
	got, err := serviceEndpoints("ns", "svc", uidA, listerSlices{slices.Lister()}, nodes.Lister())
	if err != nil {
		t.Fatal(err)
	}
	want := set(k("10.1.0.4", "10.2.0.1"), k("10.1.0.4", "10.2.0.2"))
	if len(got.addrs) != len(want) {
		t.Fatalf("addresses %v, want %v", got.addrs, want)
	}
	for x := range want {
		if _, ok := got.addrs[x]; !ok {
			t.Errorf("missing %v in %v", x, got.addrs)
		}
	}
}
