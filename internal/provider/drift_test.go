package provider

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/azlb/azlb/internal/config"
	"github.com/azlb/azlb/internal/devenv"
)

// repairPass runs one pass over the Services as the drift controller does.
func repairPass(t *testing.T, p *Provider, svcs []*v1.Service, nodes []*v1.Node) []Repair {
	t.Helper()
	ctx, out, err := p.BeginRepairPass(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range svcs {
		rs, err := p.RepairService(ctx, s, nodes)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, rs...)
	}
	return out
}

// quietPass runs a pass with nothing drifted: it must repair nothing,
// write nothing and make exactly reads ARM reads (the listings named by
// what).
func quietPass(t *testing.T, h *harness, svcs []*v1.Service, nodes []*v1.Node, reads int, what string) {
	t.Helper()
	h.env.Emulator().ResetRequests()
	if rs := repairPass(t, h.p, svcs, nodes); len(rs) != 0 {
		t.Fatalf("a pass without drift repaired %v", rs)
	}
	got := 0
	for _, r := range h.env.Emulator().Requests() {
		if r.Kind != "arm" {
			continue
		}
		if r.Method != http.MethodGet {
			t.Errorf("a pass without drift wrote: %s %s", r.Method, r.Path)
		}
		got++
	}
	if got != reads {
		t.Errorf("a pass without drift made %d reads, want %d (%s)", got, reads, what)
	}
}

func kinds(rs []Repair) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Kind)
	}
	slices.Sort(out)
	return out
}

// The drift pass: nothing drifted costs no write and three reads (the load
// balancer listing, the public IP listing and the NSG); a rule deleted, an
// admin state flipped and a security rule deleted out of band, inside the
// cache TTL, are written back and reported (issue 32 item 2).
func TestDriftPassRepairsOutOfBandChanges(t *testing.T) {
	h := newSGHarness(t, nil)
	ctx := context.Background()
	svc := testService("web", "a7111111-2222-3333-4444-555555555555", nil, 80, 443)
	svc.Finalizers = []string{serviceCleanupFinalizer}
	h.p.SetServiceLister(serviceLister(svc))
	h.p.nodes = nodeLister(sgNodes...)
	if _, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", svc, sgNodes); err != nil {
		t.Fatal(err)
	}

	quietPass(t, h.harness, []*v1.Service{svc}, sgNodes, 3, "load balancers, public IPs, the NSG")

	// Out of band: a rule deleted, n1 Down in the pool, the NSG emptied.
	lb := h.lb(t, "kubernetes")
	lb.Properties.LoadBalancingRules = lb.Properties.LoadBalancingRules[:1]
	for _, e := range findPool(lb, "kubernetes").Properties.LoadBalancerBackendAddresses {
		e.Properties.AdminState = ptr.To(armnetwork.LoadBalancerBackendAddressAdminStateDown)
	}
	if _, err := h.clients.LoadBalancer.CreateOrUpdate(ctx, devenv.ResourceGroup, "kubernetes", *lb, ptr.Deref(lb.Etag, "")); err != nil {
		t.Fatal(err)
	}
	sg, err := h.clients.SecurityGroup.Get(ctx, devenv.ResourceGroup, devenv.SecurityGroupName)
	if err != nil {
		t.Fatal(err)
	}
	sg.Properties.SecurityRules = nil
	if _, err := h.clients.SecurityGroup.CreateOrUpdate(ctx, devenv.ResourceGroup, devenv.SecurityGroupName, *sg, ""); err != nil {
		t.Fatal(err)
	}

	rs := repairPass(t, h.p, []*v1.Service{svc}, sgNodes)
	if got := strings.Join(kinds(rs), ","); got != "backend_pool,load_balancer,security_group" {
		t.Errorf("repairs %v, want one of each kind", rs)
	}
	lb = h.lb(t, "kubernetes")
	if n := len(lb.Properties.LoadBalancingRules); n != 2 {
		t.Errorf("rules after the pass = %d, want 2", n)
	}
	for _, e := range findPool(lb, "kubernetes").Properties.LoadBalancerBackendAddresses {
		if s := ptr.Deref(e.Properties.AdminState, ""); s != armnetwork.LoadBalancerBackendAddressAdminStateNone && s != "" {
			t.Errorf("entry %s admin state %s after the pass, want None", ptr.Deref(e.Name, ""), s)
		}
	}
	if len(h.rules(t)) == 0 {
		t.Error("the Service's security rule was not written back")
	}
}

// The pass never builds for a Service the service controller has not
// taken on (no cleanup finalizer) or is letting go (being deleted), nor
// for one gone from the informer.
func TestDriftPassLeavesServicesItDoesNotServe(t *testing.T) {
	h := newSGHarness(t, nil)
	fresh := testService("new", "a8111111-2222-3333-4444-555555555555", nil, 80)
	gone := testService("gone", "a9111111-2222-3333-4444-555555555555", nil, 80)
	gone.Finalizers = []string{serviceCleanupFinalizer}
	h.p.SetServiceLister(serviceLister(fresh))
	h.p.nodes = nodeLister(sgNodes...)
	h.env.Emulator().ResetRequests()
	if rs := repairPass(t, h.p, []*v1.Service{fresh, gone}, sgNodes); len(rs) != 0 {
		t.Fatalf("repairs %v, want none", rs)
	}
	if w := h.writes(); w != 0 {
		t.Fatalf("%d writes, want 0", w)
	}
	if lb := h.lb(t, "kubernetes"); lb != nil {
		t.Fatal("the pass built a load balancer")
	}
}

// A load balancer whose only Service is Local (multiple-SLB mode: it uses
// its own pool) still holds the cluster pool, and no Service's reconcile
// writes that pool: the pass itself brings the cluster pools in line, so an
// admin state flipped there out of band is put back too. With nothing
// drifted it costs no ARM call beyond the pass's three reads (chaos
// TestFaultMix, seed 1: entry fm1-n14 of kubernetes/kubernetes stayed Down).
func TestDriftPassRepairsClusterPoolNoServiceUses(t *testing.T) {
	h := newHarness(t, func(c *config.Config) {
		c.MultipleStandardLoadBalancerConfigurations = []config.MultipleStandardLoadBalancerConfiguration{{Name: "kubernetes"}}
	})
	idx := newSliceIndex()
	h.p.slices = listerOf(idx)
	ctx := context.Background()
	nodes := []*v1.Node{testNode("n1", "10.240.0.4"), testNode("n2", "10.240.0.5")}
	h.p.nodes = nodeLister(nodes...)
	svc := localAPIService()
	svc.Finalizers = []string{serviceCleanupFinalizer}
	h.p.SetServiceLister(serviceLister(svc))
	setServingSlice(t, idx, "default", "api", []string{"n1", "n2"})
	// First Cluster (the cluster pool is filled), then Local: the cluster
	// pool stays, and only the pass looks after it.
	svc.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyCluster
	if _, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", svc, nodes); err != nil {
		t.Fatal(err)
	}
	svc.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
	if _, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", svc, nodes); err != nil {
		t.Fatal(err)
	}
	if got := entryStates(findPool(h.lb(t, "kubernetes"), "kubernetes")); got != "n1/None,n2/None" {
		t.Fatalf("cluster pool = %s, want n1/None,n2/None", got)
	}

	quietPass(t, h, []*v1.Service{svc}, nodes, 2, "load balancers, public IPs; this harness has no security group")

	lb := h.lb(t, "kubernetes")
	for _, e := range findPool(lb, "kubernetes").Properties.LoadBalancerBackendAddresses {
		e.Properties.AdminState = ptr.To(armnetwork.LoadBalancerBackendAddressAdminStateDown)
	}
	if _, err := h.clients.LoadBalancer.CreateOrUpdate(ctx, devenv.ResourceGroup, "kubernetes", *lb, ptr.Deref(lb.Etag, "")); err != nil {
		t.Fatal(err)
	}
	rs := repairPass(t, h.p, []*v1.Service{svc}, nodes)
	if got := strings.Join(kinds(rs), ","); got != "backend_pool" {
		t.Errorf("repairs %v, want the cluster pool's", rs)
	}
	if got := entryStates(findPool(h.lb(t, "kubernetes"), "kubernetes")); got != "n1/None,n2/None" {
		t.Errorf("cluster pool after the pass = %s, want n1/None,n2/None", got)
	}
}
