package provider

import (
	"context"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"

	"github.com/azlb/azlb/internal/devenv"
	"github.com/azlb/azlb/internal/lbclass"
)

const testClass = lbclass.Class("azlb.example/test")

// With a load-balancer class, the NSG is shared with the default
// implementation (on AKS, AKS's cloud controller manager writes the same
// rules): the collection at start keeps the destinations it cannot place
// on a load balancer of azlb's, which may be the other's Services'.
func TestSecurityRulesNotCollectedBesideTheDefaultImplementation(t *testing.T) {
	h := newSGHarness(t, nil)
	ctx := context.Background()
	web := testService("web", "a2222222-2222-3333-4444-555555555555", nil, 80)
	web.Spec.LoadBalancerClass = ptr.To(string(testClass))
	st, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", web, sgNodes)
	if err != nil {
		t.Fatal(err)
	}
	ip := st.Ingress[0].IP
	sg, err := h.clients.SecurityGroup.Get(ctx, devenv.ResourceGroup, devenv.SecurityGroupName)
	if err != nil {
		t.Fatal(err)
	}
	const theirs = "20.99.0.2" // a frontend of the other implementation's load balancer
	r := sg.Properties.SecurityRules[0]
	r.Properties.DestinationAddressPrefix = nil
	r.Properties.DestinationAddressPrefixes = []*string{ptr.To(ip), ptr.To(theirs)}
	if _, err := h.clients.SecurityGroup.CreateOrUpdate(ctx, devenv.ResourceGroup, devenv.SecurityGroupName, *sg, ""); err != nil {
		t.Fatal(err)
	}
	p2 := newSGProvider(t, h.env.Config, h.clients, record.NewFakeRecorder(100))
	p2.SetLoadBalancerClass(testClass)
	p2.nodes = nodeLister(sgNodes...)
	p2.services = serviceLister(web)
	if _, _, err := p2.GetLoadBalancer(ctx, "kubernetes", web); err != nil {
		t.Fatal(err)
	}
	for name, r := range h.rules(t) {
		if got := ruleDests(r); !slices.Equal(got, []string{ip, theirs}) && !slices.Equal(got, []string{theirs, ip}) {
			t.Errorf("rule %s destinations = %v, want %s and %s kept", name, got, ip, theirs)
		}
	}
}

// The Basic migration tells only the Services azlb serves what happens to
// them.
func TestMigrationServicesAreOfTheClass(t *testing.T) {
	ours := testService("ours", "b2222222-2222-3333-4444-555555555555", nil, 80)
	ours.Spec.LoadBalancerClass = ptr.To(string(testClass))
	classless := testService("classless", "c2222222-2222-3333-4444-555555555555", nil, 80)
	other := testService("other", "d2222222-2222-3333-4444-555555555555", nil, 80)
	other.Spec.LoadBalancerClass = ptr.To("other.example/lb")
	clusterIP := testService("cip", "e2222222-2222-3333-4444-555555555555", nil, 80)
	clusterIP.Spec.Type = v1.ServiceTypeClusterIP
	for _, tc := range []struct {
		class lbclass.Class
		want  string
	}{
		{"", "classless"},
		{testClass, "ours"},
	} {
		p := &Provider{services: serviceLister(ours, classless, other, clusterIP), class: tc.class}
		got := p.loadBalancerServices()
		if len(got) != 1 || got[0].Name != tc.want {
			var names []string
			for _, s := range got {
				names = append(names, s.Name)
			}
			t.Errorf("class %q: Services %v, want [%s]", tc.class, names, tc.want)
		}
	}
}

func serviceLister(svcs ...*v1.Service) corelisters.ServiceLister {
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, s := range svcs {
		_ = idx.Add(s)
	}
	return corelisters.NewServiceLister(idx)
}
