package backendpool_test

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"

	"github.com/azlb/azlb/internal/backendpool"
)

// ep is an endpoint on a node in one of the states a pod goes through.
type ep struct {
	node  string
	state string // "ready", "serving-terminating", "terminating" (not serving), "not-ready", "unset"
}

func conditionsOf(state string) discoveryv1.EndpointConditions {
	switch state {
	case "ready":
		return discoveryv1.EndpointConditions{Ready: to.Ptr(true), Serving: to.Ptr(true), Terminating: to.Ptr(false)}
	case "serving-terminating":
		return discoveryv1.EndpointConditions{Ready: to.Ptr(false), Serving: to.Ptr(true), Terminating: to.Ptr(true)}
	case "terminating":
		return discoveryv1.EndpointConditions{Ready: to.Ptr(false), Serving: to.Ptr(false), Terminating: to.Ptr(true)}
	case "not-ready":
		return discoveryv1.EndpointConditions{Ready: to.Ptr(false), Serving: to.Ptr(false), Terminating: to.Ptr(false)}
	case "unset":
		return discoveryv1.EndpointConditions{}
	}
	panic("unknown endpoint state " + state)
}

// sliceOf is an EndpointSlice of the Service ns/svc named name.
func sliceOf(ns, svc, name string, eps ...ep) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
		Labels: map[string]string{discoveryv1.LabelServiceName: svc}}, AddressType: discoveryv1.AddressTypeIPv4}
	for i, e := range eps {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{fmt.Sprintf("10.244.0.%d", i+1)},
			NodeName: to.Ptr(e.node), Conditions: conditionsOf(e.state)})
	}
	return s
}

func list(s sets.Set[string]) string { return strings.Join(sets.List(s), ",") }

func TestLocalEndpointsServingAndTerminating(t *testing.T) {
	for _, tc := range []struct {
		name              string
		eps               []ep
		members, draining string
	}{
		{name: "ready only", eps: []ep{{"n1", "ready"}, {"n2", "ready"}}, members: "n1,n2"},
		{name: "unset conditions count as ready", eps: []ep{{"n1", "unset"}}, members: "n1"},
		{name: "a node's only endpoint terminates while another node is ready: draining",
			eps: []ep{{"n1", "ready"}, {"n2", "serving-terminating"}}, members: "n1,n2", draining: "n2"},
		{name: "a node with a ready and a terminating endpoint is not draining",
			eps: []ep{{"n1", "ready"}, {"n1", "serving-terminating"}, {"n2", "ready"}}, members: "n1,n2"},
		{name: "no ready endpoint at all: serving-terminating ones take traffic",
			eps: []ep{{"n1", "serving-terminating"}, {"n2", "serving-terminating"}}, members: "n1,n2"},
		{name: "terminating and no longer serving: out", eps: []ep{{"n1", "ready"}, {"n2", "terminating"}}, members: "n1"},
		{name: "not ready (starting): out", eps: []ep{{"n1", "ready"}, {"n2", "not-ready"}}, members: "n1"},
		{name: "no ready, only non-serving: empty", eps: []ep{{"n1", "terminating"}, {"n2", "not-ready"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := backendpool.LocalEndpointsOf([]*discoveryv1.EndpointSlice{sliceOf("default", "web", "web-a", tc.eps...), nil})
			if list(got.Members) != tc.members || list(got.Draining) != tc.draining {
				t.Errorf("members %q draining %q, want %q and %q", list(got.Members), list(got.Draining), tc.members, tc.draining)
			}
		})
	}
}

// The API's rules for unset conditions: ready unset is ready (not while
// terminating); serving unset on a terminating endpoint is read strictly,
// as not serving; a terminating endpoint that claims ready is not ready.
func TestLocalEndpointsUnsetConditions(t *testing.T) {
	one := func(c discoveryv1.EndpointConditions) backendpool.LocalEndpoints {
		s := &discoveryv1.EndpointSlice{Endpoints: []discoveryv1.Endpoint{
			{Addresses: []string{"10.244.0.1"}, NodeName: to.Ptr("n1"), Conditions: conditionsOf("ready")},
			{Addresses: []string{"10.244.0.2"}, NodeName: to.Ptr("n2"), Conditions: c},
			{Addresses: []string{"10.244.0.3"}, NodeName: nil, Conditions: conditionsOf("ready")},
			{Addresses: []string{"10.244.0.4"}, NodeName: to.Ptr(""), Conditions: conditionsOf("ready")},
		}}
		return backendpool.LocalEndpointsOf([]*discoveryv1.EndpointSlice{s})
	}
	for _, tc := range []struct {
		name              string
		c                 discoveryv1.EndpointConditions
		members, draining string
	}{
		{"terminating, serving unset: not serving", discoveryv1.EndpointConditions{Terminating: to.Ptr(true)}, "n1", ""},
		{"terminating, ready true (invalid), serving true: draining", discoveryv1.EndpointConditions{Terminating: to.Ptr(true), Ready: to.Ptr(true), Serving: to.Ptr(true)}, "n1,n2", "n2"},
		{"not terminating, ready false, serving true: out", discoveryv1.EndpointConditions{Ready: to.Ptr(false), Serving: to.Ptr(true)}, "n1", ""},
	} {
		got := one(tc.c)
		if list(got.Members) != tc.members || list(got.Draining) != tc.draining {
			t.Errorf("%s: members %q draining %q, want %q and %q", tc.name, list(got.Members), list(got.Draining), tc.members, tc.draining)
		}
	}
}

func localNode(name, ip string, taints ...v1.Taint) *v1.Node {
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.NodeSpec{Taints: taints},
		Status: v1.NodeStatus{Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: ip}}}}
}

func states(ms []backendpool.Member) string {
	var out []string
	for _, m := range ms {
		out = append(out, m.Name+"/"+string(m.AdminState))
	}
	return strings.Join(out, ",")
}

// The one rule for a Local Service's pool: members with their admin state,
// draining nodes Down (or out with the admin state off), taints still
// honoured, nodes without endpoints and ineligible nodes out.
func TestLocalMembers(t *testing.T) {
	oos := v1.Taint{Key: backendpool.TaintOutOfService, Effect: v1.TaintEffectNoExecute}
	nodes := []*v1.Node{
		localNode("n4", "10.0.0.4"), // no endpoint
		localNode("n3", "10.0.0.3", oos),
		localNode("n2", "10.0.0.2"),
		localNode("n1", "10.0.0.1"),
		localNode("n5", "10.0.0.5", v1.Taint{Key: backendpool.TaintToBeDeletedByClusterAutoscaler}), // ineligible
		nil,
	}
	ep := backendpool.LocalEndpointsOf([]*discoveryv1.EndpointSlice{sliceOf("default", "web", "web-a",
		ep{"n1", "ready"}, ep{"n2", "serving-terminating"}, ep{"n3", "ready"}, ep{"n5", "ready"})})
	on := backendpool.Policy{AdminState: true}
	if got := states(on.LocalMembers(nodes, v1.IPv4Protocol, ep)); got != "n1/None,n2/Down,n3/Down" {
		t.Errorf("admin state on: %s, want n1/None,n2/Down,n3/Down", got)
	}
	if got := on.LocalState(nodes[2], ep); got != armnetwork.LoadBalancerBackendAddressAdminStateDown {
		t.Errorf("LocalState(n2) = %s, want Down", got)
	}
	off := backendpool.Policy{AdminState: false}
	if got := states(off.LocalMembers(nodes, v1.IPv4Protocol, ep)); got != "n1/None,n3/None" {
		t.Errorf("admin state off: %s, want n1/None,n3/None (the draining node leaves)", got)
	}
	if got := states(on.LocalMembers(nodes, v1.IPv6Protocol, ep)); got != "" {
		t.Errorf("IPv6: %s, want nothing (no IPv6 InternalIP)", got)
	}
}

func startInformers(t *testing.T, kube *fake.Clientset) informers.SharedInformerFactory {
	t.Helper()
	factory := informers.NewSharedInformerFactory(kube, 0)
	slices := factory.Discovery().V1().EndpointSlices().Informer()
	services := factory.Core().V1().Services().Informer()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); factory.Shutdown() })
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), slices.HasSynced, services.HasSynced) {
		t.Fatal("informers did not sync")
	}
	return factory
}

func TestServiceEndpointsFromAllSlicesOfTheService(t *testing.T) {
	kube := fake.NewClientset(
		sliceOf("default", "web", "web-a", ep{"n1", "ready"}),
		sliceOf("default", "web", "web-b", ep{"n2", "ready"}, ep{"n3", "serving-terminating"}),
		sliceOf("default", "api", "api-a", ep{"n4", "ready"}), // another Service
		sliceOf("other", "web", "web-a", ep{"n5", "ready"}),   // same name, other namespace
	)
	lister := startInformers(t, kube).Discovery().V1().EndpointSlices().Lister()
	got, err := backendpool.ServiceEndpoints(lister, "default", "web")
	if err != nil || list(got.Members) != "n1,n2,n3" || list(got.Draining) != "n3" {
		t.Fatalf("ServiceEndpoints = %q/%q, %v; want n1,n2,n3 and n3", list(got.Members), list(got.Draining), err)
	}
	members, err := backendpool.EndpointNodes(lister, "default", "web")
	if err != nil || list(members) != "n1,n2,n3" {
		t.Fatalf("EndpointNodes = %q, %v; want n1,n2,n3", list(members), err)
	}
}

func TestLocalPoolsDraining(t *testing.T) {
	svc := func(name string, etp v1.ServiceExternalTrafficPolicy, typ v1.ServiceType) *v1.Service {
		return &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
			Spec: v1.ServiceSpec{Type: typ, ExternalTrafficPolicy: etp}}
	}
	draining := []ep{{"n1", "ready"}, {"n2", "serving-terminating"}}
	kube := fake.NewClientset(
		svc("web", v1.ServiceExternalTrafficPolicyLocal, v1.ServiceTypeLoadBalancer),
		svc("calm", v1.ServiceExternalTrafficPolicyLocal, v1.ServiceTypeLoadBalancer),
		svc("cluster", v1.ServiceExternalTrafficPolicyCluster, v1.ServiceTypeLoadBalancer),
		sliceOf("default", "web", "web-a", draining...),
		sliceOf("default", "calm", "calm-a", ep{"n1", "ready"}),
		sliceOf("default", "cluster", "cluster-a", draining...),
	)
	f := startInformers(t, kube)
	l := backendpool.LocalPools{Services: f.Core().V1().Services().Lister(), Slices: f.Discovery().V1().EndpointSlices().Lister()}
	got, err := l.Draining([]string{"kubernetes", "Default.Web", "default.web.IPv6", "default.calm", "default.cluster"})
	if err != nil {
		t.Fatal(err)
	}
	flat := map[string]string{}
	for k, v := range got {
		flat[k] = list(v)
	}
	if want := map[string]string{"default.web": "n2", "default.web.ipv6": "n2"}; !reflect.DeepEqual(flat, want) {
		t.Fatalf("Draining = %v, want %v", flat, want)
	}
}
