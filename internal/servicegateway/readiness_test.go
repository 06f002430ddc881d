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

type gatedSet map[string]bool

func (g gatedSet) HeldByGate(ns, name string) bool { return g[ns+"/"+name] }

// An endpoint not ready only because of azlb's readiness gate is
// registered (otherwise the gate could never turn True); one the gate does
// not hold back, or a terminating one, is not made ready; the informer's
// slice is left as it was.
func TestGatedSlicesRegisterGatedEndpoints(t *testing.T) {
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: v1.NodeStatus{Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.1.0.4"}}}}
	f := informers.NewSharedInformerFactory(fake.NewClientset(), 0)
	slices, nodes := f.Discovery().V1().EndpointSlices(), f.Core().V1().Nodes()
	_ = nodes.Informer().GetIndexer().Add(node)
	ep := func(addr, pod string, ready, terminating bool) discoveryv1.Endpoint {
		return discoveryv1.Endpoint{Addresses: []string{addr}, NodeName: ptr.To("n1"),
			TargetRef:  &v1.ObjectReference{Kind: "Pod", Namespace: "ns", Name: pod},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(ready), Serving: ptr.To(ready), Terminating: ptr.To(terminating)}}
	}
	s := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "s", Labels: map[string]string{discoveryv1.LabelServiceName: "svc"}},
		AddressType: discoveryv1.AddressTypeIPv4, Endpoints: []discoveryv1.Endpoint{
			ep("10.2.0.1", "ready", true, false),
			ep("10.2.0.2", "gated", false, false),
			ep("10.2.0.3", "starting", false, false),
			ep("10.2.0.4", "gated-terminating", false, true),
		}}
	if err := slices.Informer().GetIndexer().Add(s); err != nil {
		t.Fatal(err)
	}
	src := gatedSlices{inner: listerSlices{slices.Lister()}, gated: gatedSet{"ns/gated": true, "ns/gated-terminating": true}}
	got, err := serviceEndpoints("ns", "svc", uidA, src, nodes.Lister())
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
	if r := s.Endpoints[1].Conditions.Ready; r == nil || *r {
		t.Error("the informer's slice was changed")
	}
}
