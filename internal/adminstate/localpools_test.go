package adminstate

import (
	"context"
	"sync"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/azlb/azlb/internal/backendpool"
)

// localWeb is the Local Service default/web, whose endpoint on n1 is
// terminating but still serving while n2's is ready: n1 drains for it.
func localWeb() []runtime.Object {
	svc := &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"},
		Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, ExternalTrafficPolicy: v1.ServiceExternalTrafficPolicyLocal}}
	slice := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web-1",
		Labels: map[string]string{discoveryv1.LabelServiceName: "web"}}, AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{
			{Addresses: []string{"10.244.0.1"}, NodeName: to.Ptr("n1"),
				Conditions: discoveryv1.EndpointConditions{Ready: to.Ptr(false), Serving: to.Ptr(true), Terminating: to.Ptr(true)}},
			{Addresses: []string{"10.244.0.2"}, NodeName: to.Ptr("n2"), Conditions: discoveryv1.EndpointConditions{Ready: to.Ptr(true)}},
		}}
	return []runtime.Object{svc, slice}
}

// runLocalController runs the admin-state controller with LocalPools over
// the objects (its informers started only by the controller's wait, as in
// the controller manager, where the factory starts after the controllers).
func runLocalController(t *testing.T, f *fakeARM, objs ...runtime.Object) *fake.Clientset {
	t.Helper()
	kube := fake.NewClientset(objs...)
	factory := informers.NewSharedInformerFactory(kube, 0)
	services, slices := factory.Core().V1().Services(), factory.Discovery().V1().EndpointSlices()
	svcInf, sliceInf := services.Informer(), slices.Informer()
	mgr, err := NewManager(f.store, ManagerOptions{SubscriptionID: "sub", Source: uniqueSource(t), Policy: testPolicy,
		LocalPools:       backendpool.LocalPools{Services: services.Lister(), Slices: slices.Lister()},
		LocalPoolsSynced: func() bool { return svcInf.HasSynced() && sliceInf.HasSynced() }})
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewController(factory.Core().V1().Nodes(), mgr, &eventLog{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := c.Run(ctx); err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	factory.Start(ctx.Done())
	t.Cleanup(func() { cancel(); wg.Wait(); factory.Shutdown() })
	return kube
}

// After a restart the controller verifies every node: n1's taint was
// removed meanwhile, so its cluster pool entries go back to None, but its
// entry in default/web's pool stays Down: n1 drains for that Service (its
// endpoint is terminating but serving, n2's is ready), and the admin-state
// writer follows the same rule as the local service updater. Before that
// rule was shared, the controller set it to None.
func TestControllerKeepsDrainingLocalEntryDown(t *testing.T) {
	f := newFakeARM(t)
	f.addPool("lb-a", "kubernetes", addr{"n1", "10.0.0.1", down}, addr{"n2", "10.0.0.2", ""})
	f.addPool("lb-a", "default.web", addr{"n1", "10.0.0.1", down}, addr{"n2", "10.0.0.2", ""})
	f.addPool("lb-a", "default.other", addr{"n1", "10.0.0.1", down}) // no such Service: the taints' state
	objs := append(localWeb(), node("n1", "u1", []string{"10.0.0.1"}), node("n2", "u2", []string{"10.0.0.2"}))
	kube := runLocalController(t, f, objs...)
	poll(t, waitFor, "n1 restored in the cluster pool", func() bool {
		return f.state("lb-a", "kubernetes", "10.0.0.1") == none && f.state("lb-a", "default.other", "10.0.0.1") == none
	})
	if got := f.state("lb-a", "default.web", "10.0.0.1"); got != down {
		t.Fatalf("default.web n1 = %q, want Down (draining for the Service)", got)
	}

	// A taint and its removal write n1's entries again: the draining entry
	// stays Down throughout.
	setNodeTaints(t, kube, "n1", taintOOS)
	poll(t, waitFor, "n1 Down", func() bool { return f.state("lb-a", "kubernetes", "10.0.0.1") == down })
	setNodeTaints(t, kube, "n1")
	poll(t, waitFor, "n1 None again", func() bool { return f.state("lb-a", "kubernetes", "10.0.0.1") == none })
	if got := f.state("lb-a", "default.web", "10.0.0.1"); got != down {
		t.Fatalf("after the taint's removal default.web n1 = %q, want Down", got)
	}
	if got := f.state("lb-a", "default.web", "10.0.0.2"); got != none {
		t.Errorf("default.web n2 = %q, want None", got)
	}
}

func setNodeTaints(t *testing.T, kube *fake.Clientset, name string, taints ...v1.Taint) {
	t.Helper()
	n, err := kube.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.Spec.Taints = taints
	if _, err := kube.CoreV1().Nodes().Update(context.Background(), n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}
