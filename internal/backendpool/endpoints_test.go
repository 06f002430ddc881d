package backendpool_test

import (
	"context"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"

	"github.com/azlb/azlb/internal/backendpool"
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
	if got := sets.List(backendpool.ReadyEndpointNodes(slices)); strings.Join(got, ",") != "n1,n3" {
		t.Fatalf("ready nodes = %v, want n1,n3 (not-ready n2 out, unset readiness counts as ready)", got)
	}
}

func TestEndpointNodesFromAllSlicesOfTheService(t *testing.T) {
	slice := func(ns, svc, name string, nodes ...string) *discoveryv1.EndpointSlice {
		s := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
			Labels: map[string]string{discoveryv1.LabelServiceName: svc}}, AddressType: discoveryv1.AddressTypeIPv4}
		for _, n := range nodes {
			s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{"10.244.0.1"}, NodeName: to.Ptr(n)})
		}
		return s
	}
	kube := fake.NewClientset(
		slice("default", "web", "web-a", "n1"),
		slice("default", "web", "web-b", "n2", "n3"),
		slice("default", "api", "api-a", "n4"), // another Service
		slice("other", "web", "web-a", "n5"),   // same name, other namespace
	)
	factory := informers.NewSharedInformerFactory(kube, 0)
	lister := factory.Discovery().V1().EndpointSlices().Lister()
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); factory.Shutdown() }()
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), factory.Discovery().V1().EndpointSlices().Informer().HasSynced) {
		t.Fatal("informer did not sync")
	}
	got, err := backendpool.EndpointNodes(lister, "default", "web")
	if err != nil || strings.Join(sets.List(got), ",") != "n1,n2,n3" {
		t.Fatalf("EndpointNodes = %v, %v; want n1,n2,n3", sets.List(got), err)
	}
}
