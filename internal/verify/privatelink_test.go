package verify

import (
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/azlb/azlb/internal/annotations"
	"github.com/azlb/azlb/internal/privatelink"
)

// plsFixture is web (internal, azure-pls-create) on the fixture's load
// balancer with the Private Link Service its annotations describe.
func plsFixture(t *testing.T) (*Snapshot, *v1.Service, *armnetwork.PrivateLinkService) {
	t.Helper()
	cfg := baseConfig()
	svc := webService()
	svc.Annotations = map[string]string{annotations.KeyInternal: "true", privatelink.KeyCreate: "true", privatelink.KeyFQDNs: "web.example.com"}
	feID := lbID + "/frontendIPConfigurations/" + webBase
	spec, err := privatelink.Parse(svc.Annotations, privatelink.Defaults{ResourceGroup: rg, Subnet: "subnet"})
	if err != nil {
		t.Fatal(err)
	}
	p := privatelink.Desired(spec, privatelink.Target{FrontendID: feID, Location: "eastus",
		SubnetID:    vnetID + "/subnets/subnet",
		ClusterName: cfg.ClusterName, Owner: "default/web"}, "pls-"+webBase)
	p.Name = ptr.To("pls-" + webBase)
	p.ID = ptr.To("/subscriptions/" + sub + "/resourceGroups/rg/providers/Microsoft.Network/privateLinkServices/pls-" + webBase)
	return &Snapshot{Config: cfg, Services: []*v1.Service{svc}, LoadBalancers: []*armnetwork.LoadBalancer{webLB()},
		PrivateLinks: []*armnetwork.PrivateLinkService{&p}}, svc, &p
}

func plsFindings(s *Snapshot) []string {
	r := &Report{}
	checkPrivateLinks(s, r, nil)
	var out []string
	for _, f := range r.Findings {
		out = append(out, f.String())
	}
	return out
}

func TestPrivateLinkMatchesItsService(t *testing.T) {
	s, _, _ := plsFixture(t)
	if f := plsFindings(s); len(f) != 0 {
		t.Fatalf("findings on a matching Private Link Service: %q", f)
	}
	// Another cluster's PLS on a frontend of ours is not judged.
	other := &armnetwork.PrivateLinkService{Name: ptr.To("theirs"), Tags: map[string]*string{privatelink.TagClusterName: ptr.To("other")}}
	s.PrivateLinks = append(s.PrivateLinks, other)
	if f := plsFindings(s); len(f) != 0 {
		t.Fatalf("another cluster's Private Link Service judged: %q", f)
	}
}

func TestPrivateLinkFindings(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(s *Snapshot, svc *v1.Service, p *armnetwork.PrivateLinkService)
		want   string
	}{
		{"visibility changed in Azure", func(_ *Snapshot, _ *v1.Service, p *armnetwork.PrivateLinkService) {
			p.Properties.Visibility = &armnetwork.PrivateLinkServicePropertiesVisibility{Subscriptions: []*string{ptr.To("*")}}
		}, "does not match the azure-pls-* annotations of its Service default/web: visibility differ"},
		{"annotation changed, PLS not updated", func(_ *Snapshot, svc *v1.Service, _ *armnetwork.PrivateLinkService) {
			svc.Annotations[privatelink.KeyProxyProtocol] = "true"
			svc.Annotations[privatelink.KeyIPCount] = "2"
		}, "NAT ip configurations, proxy protocol differ"},
		{"azure-pls-create removed", func(_ *Snapshot, svc *v1.Service, _ *armnetwork.PrivateLinkService) {
			delete(svc.Annotations, privatelink.KeyCreate)
		}, "no longer asks for one"},
		{"Service gone, frontend unused", func(s *Snapshot, _ *v1.Service, _ *armnetwork.PrivateLinkService) {
			s.Services = nil
			s.LoadBalancers[0].Properties.LoadBalancingRules = nil
		}, "its Service default/web is gone and no Service uses its frontend"},
		{"Service and frontend gone", func(s *Snapshot, _ *v1.Service, _ *armnetwork.PrivateLinkService) {
			s.Services, s.LoadBalancers = nil, nil
		}, "its Service default/web is gone and so is its frontend"},
		{"no PLS for a Service asking for one", func(s *Snapshot, _ *v1.Service, _ *armnetwork.PrivateLinkService) {
			s.PrivateLinks = nil
		}, "service default/web: asks for a Private Link Service"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, svc, p := plsFixture(t)
			tc.mutate(s, svc, p)
			f := plsFindings(s)
			if len(f) != 1 || !strings.Contains(f[0], tc.want) || !strings.Contains(f[0], "docs/private-link.md") {
				t.Fatalf("findings %q, want one containing %q", f, tc.want)
			}
		})
	}
	// The owner gone but another Service still using the frontend: the
	// PLS stays for it.
	s, _, _ := plsFixture(t)
	s.Services = nil
	if f := plsFindings(s); len(f) != 0 {
		t.Fatalf("a PLS whose frontend other Services still use: %q", f)
	}
}
