package provider

import (
	"context"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/azlb/azlb/internal/config"
	"github.com/azlb/azlb/internal/devenv"
	"github.com/azlb/azlb/internal/names"
)

// restartWith builds a new provider (a restarted controller) whose
// azure.json is the harness's edited by mutate.
func (h *harness) restartWith(t *testing.T, mutate func(*config.Config)) *Provider {
	t.Helper()
	cfg := *h.env.Config
	cfg.MultipleStandardLoadBalancerConfigurations = append([]config.MultipleStandardLoadBalancerConfiguration(nil), cfg.MultipleStandardLoadBalancerConfigurations...)
	mutate(&cfg)
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return newProvider(t, &cfg, h.clients, h.recorder)
}

// A Service on a load balancer whose configuration was removed moves to a
// configured one, keeps its public IP, and leaves nothing behind; the same
// when the cluster leaves multiple-SLB mode altogether.
func TestServiceLeavesARemovedConfiguration(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*config.Config)
	}{
		{"configuration removed", func(c *config.Config) {
			c.MultipleStandardLoadBalancerConfigurations = []config.MultipleStandardLoadBalancerConfiguration{{Name: "kubernetes"}}
		}},
		{"multiple-SLB mode left", func(c *config.Config) { c.MultipleStandardLoadBalancerConfigurations = nil }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// kubernetes takes no new Service: both go to lb-2.
			h := newHarness(t, func(c *config.Config) {
				c.MultipleStandardLoadBalancerConfigurations = []config.MultipleStandardLoadBalancerConfiguration{
					{Name: "kubernetes", AllowServicePlacement: to.Ptr(false)}, {Name: "lb-2"}}
			})
			ctx := context.Background()
			nodes := []*v1.Node{testNode("n1", "10.240.0.4"), testNode("n2", "10.240.0.5")}
			svc := testService("web", "a1a1a1a1-0000-0000-0000-000000000020", nil, 80)
			local := testService("api", "a2a2a2a2-0000-0000-0000-000000000021", nil, 8080)
			local.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
			local.Spec.HealthCheckNodePort = 32002
			h.p.slices = sliceLister(t, "default", "api", "n1")
			before := map[string]string{}
			for _, s := range []*v1.Service{svc, local} {
				st, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", s, nodes)
				if err != nil {
					t.Fatal(err)
				}
				before[s.Name] = st.Ingress[0].IP
			}
			if lb := h.lb(t, "lb-2"); lb == nil || findPool(lb, names.LocalServicePool("default", "api", v1.IPv4Protocol)) == nil {
				t.Fatal("setup: the Services are not on lb-2 with the Local pool")
			}

			p2 := h.restartWith(t, tc.mutate)
			p2.slices = sliceLister(t, "default", "api", "n1")
			for _, s := range []*v1.Service{svc, local} {
				st, err := p2.EnsureLoadBalancer(ctx, "kubernetes", s, nodes)
				if err != nil {
					t.Fatalf("%s after the configuration change: %v", s.Name, err)
				}
				if st.Ingress[0].IP != before[s.Name] {
					t.Errorf("%s: address %s -> %s, want it kept", s.Name, before[s.Name], st.Ingress[0].IP)
				}
				if lb := h.lb(t, "kubernetes"); lb == nil || !hasOwnedFrontend(lb, names.FrontendBase(s)) {
					t.Errorf("%s is not on kubernetes", s.Name)
				}
			}
			if lb := h.lb(t, "lb-2"); lb != nil {
				t.Errorf("lb-2 left behind with %d frontends, %d rules, %d pools", frontendCount(lb),
					len(lb.Properties.LoadBalancingRules), len(lb.Properties.BackendAddressPools))
			}
			// And it is steady: another pass writes nothing.
			h.env.Emulator().ResetRequests()
			for _, s := range []*v1.Service{svc, local} {
				if _, err := p2.EnsureLoadBalancer(ctx, "kubernetes", s, nodes); err != nil {
					t.Fatal(err)
				}
			}
			if w := h.writes(); w != 0 {
				t.Errorf("%d writes after the move settled, want 0", w)
			}
		})
	}
}

// An internal Service that moves between load balancers keeps its private
// address (carried over as a static address), and stays put afterwards.
func TestInternalServiceKeepsItsAddressWhenItMoves(t *testing.T) {
	h := newHarness(t, func(c *config.Config) {
		c.MultipleStandardLoadBalancerConfigurations = []config.MultipleStandardLoadBalancerConfiguration{
			{Name: "kubernetes", ServiceNamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "none"}}},
			{Name: "lb-2"},
		}
	})
	ctx := context.Background()
	nodes := []*v1.Node{testNode("n1", "10.240.0.4")}
	// Two internal Services on lb-2 take the first two addresses; the
	// second is the one that moves, so a fresh dynamic address on the other
	// load balancer would differ from its own.
	first := testService("first", "b1b1b1b1-0000-0000-0000-000000000030", map[string]string{"service.beta.kubernetes.io/azure-load-balancer-internal": "true"}, 80)
	svc := testService("db", "b2b2b2b2-0000-0000-0000-000000000031", map[string]string{"service.beta.kubernetes.io/azure-load-balancer-internal": "true"}, 5432)
	if _, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", first, nodes); err != nil {
		t.Fatal(err)
	}
	st1, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", svc, nodes)
	if err != nil {
		t.Fatal(err)
	}
	if lb := h.lb(t, "lb-2-internal"); lb == nil || !hasOwnedFrontend(lb, names.FrontendBase(svc)) {
		t.Fatal("setup: db is not on lb-2-internal")
	}

	// The namespace selector of kubernetes now matches everything and lb-2
	// may take no new Service... and lb-2 now only takes namespace "other":
	// db must move to kubernetes-internal.
	p2 := h.restartWith(t, func(c *config.Config) {
		c.MultipleStandardLoadBalancerConfigurations = []config.MultipleStandardLoadBalancerConfiguration{
			{Name: "kubernetes"},
			{Name: "lb-2", ServiceNamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "other"}}},
		}
	})
	st2, err := p2.EnsureLoadBalancer(ctx, "kubernetes", svc, nodes)
	if err != nil {
		t.Fatalf("move: %v", err)
	}
	if lb := h.lb(t, "kubernetes-internal"); lb == nil || !hasOwnedFrontend(lb, names.FrontendBase(svc)) {
		t.Fatal("db did not move to kubernetes-internal")
	}
	if st1.Ingress[0].IP != st2.Ingress[0].IP {
		t.Fatalf("private address changed on the move: %s -> %s", st1.Ingress[0].IP, st2.Ingress[0].IP)
	}
	fe := findFrontend(h.lb(t, "kubernetes-internal"), names.Frontend(svc, v1.IPv4Protocol))
	if ptr.Deref(fe.Properties.PrivateIPAllocationMethod, "") != armnetwork.IPAllocationMethodStatic {
		t.Errorf("moved frontend allocation %s, want Static (the carried address)", ptr.Deref(fe.Properties.PrivateIPAllocationMethod, ""))
	}
	h.env.Emulator().ResetRequests()
	if _, err := p2.EnsureLoadBalancer(ctx, "kubernetes", svc, nodes); err != nil {
		t.Fatal(err)
	}
	if w := h.writes(); w != 0 {
		t.Errorf("%d writes after the move, want 0", w)
	}
}

// a-b/c and a/b-c each get their own dedicated pool; deleting one leaves
// the other's pool and members alone.
func TestLocalServicePoolNamesDoNotCollide(t *testing.T) {
	h := newHarness(t, func(c *config.Config) {
		c.MultipleStandardLoadBalancerConfigurations = []config.MultipleStandardLoadBalancerConfiguration{{Name: "kubernetes"}}
	})
	ctx := context.Background()
	nodes := []*v1.Node{testNode("n1", "10.240.0.4"), testNode("n2", "10.240.0.5")}
	idx := newSliceIndex()
	h.p.slices = listerOf(idx)
	one := testService("c", "c1c1c1c1-0000-0000-0000-000000000040", nil, 80)
	one.Namespace = "a-b"
	two := testService("b-c", "c2c2c2c2-0000-0000-0000-000000000041", nil, 81)
	two.Namespace = "a"
	setSlice(t, idx, "a-b", "c", "n1")
	setSlice(t, idx, "a", "b-c", "n2")
	for _, s := range []*v1.Service{one, two} {
		s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
		s.Spec.HealthCheckNodePort = 32003
		if _, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", s, nodes); err != nil {
			t.Fatal(err)
		}
	}
	lb := h.lb(t, "kubernetes")
	if got := poolNames(findPool(lb, "a-b.c")); strings.Join(got, ",") != "n1" {
		t.Errorf("a-b/c pool %v, want n1", got)
	}
	if got := poolNames(findPool(lb, "a.b-c")); strings.Join(got, ",") != "n2" {
		t.Errorf("a/b-c pool %v, want n2", got)
	}
	if err := h.p.EnsureLoadBalancerDeleted(ctx, "kubernetes", one); err != nil {
		t.Fatalf("delete a-b/c: %v", err)
	}
	lb = h.lb(t, "kubernetes")
	if findPool(lb, "a-b.c") != nil {
		t.Error("a-b/c's pool kept after its deletion")
	}
	if got := poolNames(findPool(lb, "a.b-c")); strings.Join(got, ",") != "n2" {
		t.Errorf("a/b-c pool %v after a-b/c left, want n2", got)
	}
}

// A Local Service whose pool earlier releases named <namespace>-<name>
// moves to its collision-free pool: the new pool starts with the old pool's
// entries, the rules follow, the old pool goes (unless another Service's
// rules still use it).
func TestLegacyLocalServicePoolIsAdopted(t *testing.T) {
	h := newHarness(t, func(c *config.Config) {
		c.MultipleStandardLoadBalancerConfigurations = []config.MultipleStandardLoadBalancerConfiguration{{Name: "kubernetes"}}
	})
	ctx := context.Background()
	nodes := []*v1.Node{testNode("n1", "10.240.0.4"), testNode("n2", "10.240.0.5")}
	h.p.slices = sliceLister(t, "shop", "web", "n2")
	svc := testService("web", "d1d1d1d1-0000-0000-0000-000000000050", nil, 80)
	svc.Namespace = "shop"
	svc.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
	svc.Spec.HealthCheckNodePort = 32004
	if _, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", svc, nodes); err != nil {
		t.Fatal(err)
	}
	// Make it look as an earlier release left it: the pool named shop-web.
	lb := h.lb(t, "kubernetes")
	newName := names.LocalServicePool("shop", "web", v1.IPv4Protocol)
	for _, p := range lb.Properties.BackendAddressPools {
		if *p.Name == newName {
			p.Name = to.Ptr("shop-web")
			p.ID = nil
		}
	}
	for _, r := range lb.Properties.LoadBalancingRules {
		r.Properties.BackendAddressPool.ID = to.Ptr(strings.Replace(*r.Properties.BackendAddressPool.ID, newName, "shop-web", 1))
		r.Properties.BackendAddressPools = nil
	}
	if _, err := h.clients.LoadBalancer.CreateOrUpdate(ctx, devenv.ResourceGroup, "kubernetes", *lb, ""); err != nil {
		t.Fatal(err)
	}

	p2 := h.restartWith(t, func(*config.Config) {})
	p2.slices = sliceLister(t, "shop", "web", "n2")
	h.env.Emulator().ResetRequests()
	if _, err := p2.EnsureLoadBalancer(ctx, "kubernetes", svc, nodes); err != nil {
		t.Fatalf("reconcile after upgrade: %v", err)
	}
	lb = h.lb(t, "kubernetes")
	if findPool(lb, "shop-web") != nil {
		t.Error("the legacy pool was kept")
	}
	if got := poolNames(findPool(lb, newName)); strings.Join(got, ",") != "n2" {
		t.Errorf("adopted pool %v, want n2", got)
	}
	for _, r := range lb.Properties.LoadBalancingRules {
		if !strings.HasSuffix(*r.Properties.BackendAddressPool.ID, "/"+newName) {
			t.Errorf("rule %s still sends traffic to %s", *r.Name, *r.Properties.BackendAddressPool.ID)
		}
	}
	if w := h.writes(); w != 1 {
		t.Errorf("adoption took %d writes, want 1 (the entries move with the load balancer write)", w)
	}
}

// A Service that a load balancer's serviceLabelSelector matches is placed
// there rather than on a load balancer without selector that has fewer
// rules; labelled later, it moves there keeping its public IP (issue 40
// item 8).
func TestMatchingSelectorIsPreferred(t *testing.T) {
	h := newHarness(t, func(c *config.Config) {
		c.MultipleStandardLoadBalancerConfigurations = []config.MultipleStandardLoadBalancerConfiguration{
			{Name: "kubernetes"},
			{Name: "lb-web", ServiceLabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}},
		}
	})
	ctx := context.Background()
	nodes := []*v1.Node{testNode("n1", "10.240.0.4")}
	web := testService("web", "c1c1c1c1-0000-0000-0000-000000000040", nil, 80)
	web.Labels = map[string]string{"app": "web"}
	if _, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", web, nodes); err != nil {
		t.Fatal(err)
	}
	if lb := h.lb(t, "lb-web"); lb == nil || !hasOwnedFrontend(lb, names.FrontendBase(web)) {
		t.Fatal("web is not on lb-web, whose serviceLabelSelector matches it")
	}
	api := testService("api", "c2c2c2c2-0000-0000-0000-000000000041", nil, 8080)
	st1, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", api, nodes)
	if err != nil {
		t.Fatal(err)
	}
	if lb := h.lb(t, "kubernetes"); lb == nil || !hasOwnedFrontend(lb, names.FrontendBase(api)) {
		t.Fatal("api (no label) is not on kubernetes")
	}
	api = api.DeepCopy()
	api.Labels = map[string]string{"app": "web"}
	st2, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", api, nodes)
	if err != nil {
		t.Fatal(err)
	}
	if lb := h.lb(t, "lb-web"); lb == nil || !hasOwnedFrontend(lb, names.FrontendBase(api)) {
		t.Fatal("api, labelled app=web, did not move to lb-web")
	}
	if st1.Ingress[0].IP != st2.Ingress[0].IP {
		t.Errorf("address changed on the move: %s -> %s", st1.Ingress[0].IP, st2.Ingress[0].IP)
	}
}
