package provider

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/cloud-provider/api"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/azlb/azlb/internal/annotations"
	"github.com/azlb/azlb/internal/azure"
	"github.com/azlb/azlb/internal/backendpool"
	"github.com/azlb/azlb/internal/config"
	"github.com/azlb/azlb/internal/devenv"
	"github.com/azlb/azlb/internal/emulator"
	"github.com/azlb/azlb/internal/lbstore"
	"github.com/azlb/azlb/internal/names"
	"github.com/azlb/azlb/internal/testutil"
)

// harness is a provider wired to a seeded in-process emulator.
type harness struct {
	env      *devenv.Env
	clients  *azure.Clients
	p        *Provider
	recorder *record.FakeRecorder
}

func newHarness(t *testing.T, mutate func(*config.Config)) *harness {
	t.Helper()
	env := testutil.StartEmulator(t, emulator.Options{}, mutate)
	clients := testutil.Clients(t, env, azure.ClientOptions{})
	h := &harness{env: env, clients: clients, recorder: record.NewFakeRecorder(100)}
	h.p = newProvider(t, env.Config, clients, h.recorder)
	env.Emulator().ResetRequests() // count only what the test does, not the seeding
	return h
}

// newProvider builds a provider (as a restarted controller would: a new
// store with an empty cache) on the clients.
func newProvider(t testing.TB, cfg *config.Config, clients *azure.Clients, rec record.EventRecorder) *Provider {
	t.Helper()
	store := testutil.StartStore(t, lbstore.Options{Config: cfg, LoadBalancers: clients.LoadBalancer, Pools: clients.BackendPool})
	p, err := New(Options{Config: cfg, Clients: clients, Store: store, Recorder: rec})
	if err != nil {
		t.Fatalf("provider: %v", err)
	}
	return p
}

// writes counts ARM writes in the emulator's request log.
func (h *harness) writes() int {
	n := 0
	for _, r := range h.env.Emulator().Requests() {
		if r.Kind == "arm" && r.Method != http.MethodGet && r.Method != http.MethodHead {
			n++
		}
	}
	return n
}

func (h *harness) lb(t *testing.T, name string) *armnetwork.LoadBalancer {
	t.Helper()
	lb, err := h.clients.LoadBalancer.Get(context.Background(), devenv.ResourceGroup, name)
	if err != nil {
		if azure.Classify(err) == azure.ClassStale {
			return nil
		}
		t.Fatalf("get lb %s: %v", name, err)
	}
	return lb
}

func testNode(name, ip string) *v1.Node {
	return testutil.Node(name, testutil.InternalIPs(ip))
}

func TestServiceLifecycleAgainstEmulator(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()
	svc := testService("web", "11111111-2222-3333-4444-555555555555", nil, 80, 443)
	nodes := []*v1.Node{testNode("n1", "10.240.0.4"), testNode("n2", "10.240.0.5")}

	st, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", svc, nodes)
	if err != nil {
		t.Fatalf("EnsureLoadBalancer: %v", err)
	}
	if len(st.Ingress) != 1 || st.Ingress[0].IP == "" {
		t.Fatalf("ingress = %+v, want one IP", st.Ingress)
	}
	lb := h.lb(t, "kubernetes")
	if lb == nil {
		t.Fatal("load balancer kubernetes not created")
	}
	if got := len(lb.Properties.LoadBalancingRules); got != 2 {
		t.Errorf("rules = %d, want 2", got)
	}
	pool := findPool(lb, "kubernetes")
	if pool == nil || len(pool.Properties.LoadBalancerBackendAddresses) != 2 {
		t.Fatalf("cluster pool = %+v, want 2 addresses", pool)
	}

	// Steady state: the same Service and nodes again cost no write.
	h.env.Emulator().ResetRequests()
	if _, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", svc, nodes); err != nil {
		t.Fatalf("second EnsureLoadBalancer: %v", err)
	}
	if w := h.writes(); w != 0 {
		t.Fatalf("resync made %d ARM writes, want 0", w)
	}

	// A node joins: one pool write.
	h.env.Emulator().ResetRequests()
	nodes = append(nodes, testNode("n3", "10.240.0.6"))
	if err := h.p.UpdateLoadBalancer(ctx, "kubernetes", svc, nodes); err != nil {
		t.Fatalf("UpdateLoadBalancer: %v", err)
	}
	if w := h.writes(); w != 1 {
		t.Fatalf("node add made %d ARM writes, want 1", w)
	}
	if got := len(findPool(h.lb(t, "kubernetes"), "kubernetes").Properties.LoadBalancerBackendAddresses); got != 3 {
		t.Fatalf("pool has %d addresses, want 3", got)
	}

	status, exists, err := h.p.GetLoadBalancer(ctx, "kubernetes", svc)
	if err != nil || !exists || status.Ingress[0].IP != st.Ingress[0].IP {
		t.Fatalf("GetLoadBalancer = %+v, %v, %v", status, exists, err)
	}

	if err := h.p.EnsureLoadBalancerDeleted(ctx, "kubernetes", svc); err != nil {
		t.Fatalf("EnsureLoadBalancerDeleted: %v", err)
	}
	if lb := h.lb(t, "kubernetes"); lb != nil {
		t.Fatalf("load balancer still exists with %d frontends", frontendCount(lb))
	}
	pips, err := h.clients.PublicIP.List(ctx, devenv.ResourceGroup)
	if err != nil {
		t.Fatal(err)
	}
	for _, pip := range pips {
		if strings.Contains(ptr.Deref(pip.Name, ""), names.FrontendBase(svc)) {
			t.Fatalf("owned public IP %s not deleted", ptr.Deref(pip.Name, ""))
		}
	}

	// A node sync that listed the Service before its deletion builds
	// nothing for it (found by the chaos suite: it re-created the public IP
	// and frontend of a deleted Service).
	h.env.Emulator().ResetRequests()
	if err := h.p.UpdateLoadBalancer(ctx, "kubernetes", svc, nodes); err != nil {
		t.Fatalf("UpdateLoadBalancer after delete: %v", err)
	}
	if w := h.writes(); w != 0 {
		t.Fatalf("UpdateLoadBalancer of a deleted Service made %d ARM writes, want 0", w)
	}
	// The same Service made a LoadBalancer again is served again.
	if _, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", svc, nodes); err != nil {
		t.Fatalf("EnsureLoadBalancer after delete: %v", err)
	}
	if lb := h.lb(t, "kubernetes"); lb == nil || frontendCount(lb) == 0 {
		t.Fatal("EnsureLoadBalancer after a delete built no frontend")
	}
}

func multiSLBConfig(c *config.Config) {
	c.MultipleStandardLoadBalancerConfigurations = []config.MultipleStandardLoadBalancerConfiguration{
		{Name: "kubernetes"},
		{Name: "lb-2", ServiceLabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "two"}}},
		{Name: "lb-3", NodeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"pool": "three"}}},
	}
}

func withLabels(n *v1.Node, kv ...string) *v1.Node {
	n.Labels = map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		n.Labels[kv[i]] = kv[i+1]
	}
	return n
}

func TestMultipleSLBPlacementAndRestart(t *testing.T) {
	h := newHarness(t, multiSLBConfig)
	ctx := context.Background()
	nodes := []*v1.Node{
		testNode("a1", "10.240.0.10"), testNode("a2", "10.240.0.11"),
		withLabels(testNode("c1", "10.240.0.20"), "pool", "three"),
	}
	svcA := testService("a", "aaaaaaaa-0000-0000-0000-000000000001", nil, 80)
	svcB := testService("b", "bbbbbbbb-0000-0000-0000-000000000002", nil, 80)
	svcB.Labels = map[string]string{"tier": "two"}
	svcC := testService("c", "cccccccc-0000-0000-0000-000000000003", nil, 80, 81)
	for _, svc := range []*v1.Service{svcA, svcB, svcC} {
		if _, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", svc, nodes); err != nil {
			t.Fatalf("EnsureLoadBalancer(%s): %v", svc.Name, err)
		}
	}
	// a: all empty, ties go to configuration order -> kubernetes. b: may go
	// anywhere (kubernetes and lb-3 have no selector, lb-2's matches); lb-2
	// and lb-3 have the fewest rules (0), order picks lb-2. c: only lb-3 has
	// no rules -> lb-3.
	want := map[string]string{"a": "kubernetes", "b": "lb-2", "c": "lb-3"}
	for svcName, lbName := range want {
		lb := h.lb(t, lbName)
		base := map[string]string{"a": names.FrontendBase(svcA), "b": names.FrontendBase(svcB), "c": names.FrontendBase(svcC)}[svcName]
		if lb == nil || !hasOwnedFrontend(lb, base) {
			t.Errorf("service %s is not on %s", svcName, lbName)
		}
	}
	// Nodes: c1 matches lb-3's selector; a1 and a2 go to the selector-less
	// load balancers, one each (fewest nodes).
	if got := poolNames(findPool(h.lb(t, "lb-3"), "kubernetes")); strings.Join(got, ",") != "c1" {
		t.Errorf("lb-3 pool = %v, want [c1]", got)
	}
	n1, n2 := poolNames(findPool(h.lb(t, "kubernetes"), "kubernetes")), poolNames(findPool(h.lb(t, "lb-2"), "kubernetes"))
	if len(n1)+len(n2) != 2 || len(n1) != 1 {
		t.Errorf("kubernetes pool %v, lb-2 pool %v: want a1 and a2 split one each", n1, n2)
	}

	// Restart: a new provider rebuilds placement from Azure and moves
	// nothing.
	clients, err := h.env.Clients(ctx, azure.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer clients.Close()
	p2, err := New(Options{Config: h.env.Config, Clients: clients,
		Store: testutil.StartStore(t, lbstore.Options{Config: h.env.Config, LoadBalancers: clients.LoadBalancer, Pools: clients.BackendPool})})
	if err != nil {
		t.Fatal(err)
	}
	h.env.Emulator().ResetRequests()
	for _, svc := range []*v1.Service{svcC, svcB, svcA} { // other order on purpose
		if _, err := p2.EnsureLoadBalancer(ctx, "kubernetes", svc, nodes); err != nil {
			t.Fatalf("after restart, EnsureLoadBalancer(%s): %v", svc.Name, err)
		}
	}
	if w := h.writes(); w != 0 {
		t.Fatalf("restart made %d ARM writes, want 0", w)
	}
}

// Services ensured concurrently count each other's placement (the audit:
// three Services created in one apply all went to one load balancer).
func TestConcurrentPlacementsCountEachOther(t *testing.T) {
	h := newHarness(t, func(c *config.Config) {
		c.MultipleStandardLoadBalancerConfigurations = []config.MultipleStandardLoadBalancerConfiguration{{Name: "kubernetes"}, {Name: "lb-2"}}
	})
	ctx := context.Background()
	nodes := []*v1.Node{testNode("a1", "10.240.0.10"), testNode("a2", "10.240.0.11")}
	var svcs []*v1.Service
	for i := range 4 {
		svcs = append(svcs, testService(fmt.Sprintf("s%d", i), fmt.Sprintf("e%d000000-0000-0000-0000-000000000000", i), nil, 80))
	}
	var wg sync.WaitGroup
	for _, svc := range svcs {
		wg.Go(func() {
			if _, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", svc, nodes); err != nil {
				t.Errorf("EnsureLoadBalancer(%s): %v", svc.Name, err)
			}
		})
	}
	wg.Wait()
	for _, name := range []string{"kubernetes", "lb-2"} {
		if n := ruleCount(h.lb(t, name)); n != 2 {
			t.Errorf("load balancer %s has %d rules, want 2 (4 one-port Services over 2 load balancers)", name, n)
		}
	}
}

func TestMultipleSLBPlacementErrorIsAnEvent(t *testing.T) {
	h := newHarness(t, multiSLBConfig)
	svc := testService("x", "dddddddd-0000-0000-0000-000000000004", map[string]string{
		"service.beta.kubernetes.io/azure-load-balancer-configurations": "lb-2",
	}, 80)
	_, err := h.p.EnsureLoadBalancer(context.Background(), "kubernetes", svc, []*v1.Node{testNode("a1", "10.240.0.10")})
	if err == nil {
		t.Fatal("service without the tier=two label placed on lb-2")
	}
	select {
	case ev := <-h.recorder.Events:
		if !strings.Contains(ev, EventReasonPlacementFailed) || !strings.Contains(ev, "lb-2") {
			t.Fatalf("event %q, want %s naming lb-2", ev, EventReasonPlacementFailed)
		}
	default:
		t.Fatal("no event recorded")
	}
}

func TestBadAnnotationIsAWarningEvent(t *testing.T) {
	h := newHarness(t, nil)
	svc := testService("web", "eeeeeeee-0000-0000-0000-000000000005", map[string]string{
		"service.beta.kubernetes.io/azure-load-balancer-health-probe-interval": "abc",
	}, 80)
	_, err := h.p.EnsureLoadBalancer(context.Background(), "kubernetes", svc, nil)
	if err == nil || !strings.Contains(err.Error(), "health-probe-interval") {
		t.Fatalf("err = %v, want one naming the annotation", err)
	}
	ev := <-h.recorder.Events
	if !strings.HasPrefix(ev, "Warning "+EventReasonInvalidAnnotation) {
		t.Fatalf("event %q", ev)
	}
	if w := h.writes(); w != 0 {
		t.Fatalf("invalid Service caused %d writes", w)
	}
}

func TestInternalDualStackService(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()
	svc := testService("db", "ffffffff-0000-0000-0000-000000000006", map[string]string{
		"service.beta.kubernetes.io/azure-load-balancer-internal": "true",
	}, 5432)
	svc.Spec.IPFamilies = []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}
	node := testNode("n1", "10.240.0.4")
	node.Status.Addresses = append(node.Status.Addresses, v1.NodeAddress{Type: v1.NodeInternalIP, Address: "fd00:10::4"})
	st, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", svc, []*v1.Node{node})
	if err != nil {
		t.Fatalf("EnsureLoadBalancer: %v", err)
	}
	if len(st.Ingress) != 2 || st.Ingress[0].IP == "" || st.Ingress[1].IP == "" {
		t.Fatalf("ingress = %+v, want an IPv4 and an IPv6 address", st.Ingress)
	}
	lb := h.lb(t, "kubernetes-internal")
	if lb == nil {
		t.Fatal("internal load balancer not created")
	}
	for _, pool := range []string{"kubernetes", "kubernetes-IPv6"} {
		if got := poolNames(findPool(lb, pool)); len(got) != 1 {
			t.Errorf("pool %s members %v, want [n1]", pool, got)
		}
	}
	if h.lb(t, "kubernetes") != nil {
		t.Error("an internal Service created the public load balancer")
	}
}

func poolNames(pool *armnetwork.BackendAddressPool) []string {
	if pool == nil || pool.Properties == nil {
		return nil
	}
	var out []string
	for _, a := range pool.Properties.LoadBalancerBackendAddresses {
		out = append(out, ptr.Deref(a.Name, ""))
	}
	return out
}

func TestPublicToInternalMovesAndCleansUp(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()
	svc := testService("web", "12121212-0000-0000-0000-000000000007", nil, 80)
	nodes := []*v1.Node{testNode("n1", "10.240.0.4")}
	if _, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", svc, nodes); err != nil {
		t.Fatal(err)
	}
	// A user-owned public IP for a second Service, which must survive.
	userPIP := "user-owned-pip"
	if _, err := h.clients.PublicIP.CreateOrUpdate(ctx, devenv.ResourceGroup, userPIP, armnetwork.PublicIPAddress{
		Location:   to.Ptr(devenv.Location),
		SKU:        &armnetwork.PublicIPAddressSKU{Name: to.Ptr(armnetwork.PublicIPAddressSKUNameStandard)},
		Properties: &armnetwork.PublicIPAddressPropertiesFormat{PublicIPAllocationMethod: to.Ptr(armnetwork.IPAllocationMethodStatic)},
	}, ""); err != nil {
		t.Fatal(err)
	}
	other := testService("byo", "34343434-0000-0000-0000-000000000008", map[string]string{"service.beta.kubernetes.io/azure-pip-name": userPIP}, 443)
	if _, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", other, nodes); err != nil {
		t.Fatal(err)
	}

	svc.Annotations = map[string]string{"service.beta.kubernetes.io/azure-load-balancer-internal": "true"}
	st, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", svc, nodes)
	if err != nil {
		t.Fatalf("EnsureLoadBalancer (internal): %v", err)
	}
	if len(st.Ingress) != 1 || !strings.HasPrefix(st.Ingress[0].IP, "10.240.") {
		t.Fatalf("ingress %+v, want a private address from the subnet", st.Ingress)
	}
	if lb := h.lb(t, "kubernetes"); lb == nil || hasOwnedFrontend(lb, names.FrontendBase(svc)) {
		t.Fatal("public frontend not removed (or the other Service's load balancer deleted)")
	}
	if _, err := h.clients.PublicIP.Get(ctx, devenv.ResourceGroup, names.PublicIP("kubernetes", svc, v1.IPv4Protocol)); azure.Classify(err) != azure.ClassStale {
		t.Fatalf("owned public IP of the moved Service still exists (err=%v)", err)
	}
	if err := h.p.EnsureLoadBalancerDeleted(ctx, "kubernetes", other); err != nil {
		t.Fatal(err)
	}
	if _, err := h.clients.PublicIP.Get(ctx, devenv.ResourceGroup, userPIP); err != nil {
		t.Fatalf("user-owned public IP deleted: %v", err)
	}
}

func TestMultipleSLBMoveKeepsPublicIP(t *testing.T) {
	h := newHarness(t, multiSLBConfig)
	ctx := context.Background()
	nodes := []*v1.Node{testNode("a1", "10.240.0.10")}
	svc := testService("mover", "56565656-0000-0000-0000-000000000009", map[string]string{
		"service.beta.kubernetes.io/azure-load-balancer-configurations": "lb-2",
	}, 80)
	svc.Labels = map[string]string{"tier": "two"}
	st1, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", svc, nodes)
	if err != nil {
		t.Fatal(err)
	}
	// The label no longer matches lb-2's serviceLabelSelector: the Service
	// moves (the annotation now allows lb-3 too) and keeps its address.
	svc.Labels = nil
	svc.Annotations["service.beta.kubernetes.io/azure-load-balancer-configurations"] = "lb-2,lb-3"
	st2, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", svc, nodes)
	if err != nil {
		t.Fatalf("move: %v", err)
	}
	if st1.Ingress[0].IP != st2.Ingress[0].IP {
		t.Fatalf("address changed on move: %s -> %s", st1.Ingress[0].IP, st2.Ingress[0].IP)
	}
	if lb := h.lb(t, "lb-2"); lb != nil {
		t.Fatalf("lb-2 still exists with %d frontends", frontendCount(lb))
	}
	if lb := h.lb(t, "lb-3"); lb == nil || !hasOwnedFrontend(lb, names.FrontendBase(svc)) {
		t.Fatal("Service not on lb-3")
	}
}

// A write made by someone else between our read and our write: ARM answers
// 412, the provider re-reads and re-applies, nothing is lost.
func TestConcurrentChangeGets412AndConverges(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()
	nodes := []*v1.Node{testNode("n1", "10.240.0.4")}
	a := testService("a", "aaaaaaaa-1111-0000-0000-000000000010", nil, 80)
	if _, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", a, nodes); err != nil {
		t.Fatal(err)
	}
	// Our cache holds the load balancer (GetLoadBalancer reads through it);
	// then someone else tags it: its etag changes, our copy is stale.
	if _, _, err := h.p.GetLoadBalancer(ctx, "kubernetes", a); err != nil {
		t.Fatal(err)
	}
	lb := h.lb(t, "kubernetes")
	lb.Tags = map[string]*string{"owner": to.Ptr("someone-else")}
	if _, err := h.clients.LoadBalancer.CreateOrUpdate(ctx, devenv.ResourceGroup, "kubernetes", *lb, ptr.Deref(lb.Etag, "")); err != nil {
		t.Fatal(err)
	}
	// The reconcile reads the load balancer afresh (it sees the tag), and
	// someone writes it again between that read and the PUT: one 412.
	if _, err := h.env.Emulator().AddFault(emulator.Fault{Method: http.MethodPut, PathRegex: `/loadBalancers/kubernetes$`, Status: http.StatusPreconditionFailed, Count: 1}); err != nil {
		t.Fatal(err)
	}
	h.env.Emulator().ResetRequests()
	b := testService("b", "bbbbbbbb-1111-0000-0000-000000000011", nil, 81)
	if _, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", b, nodes); err != nil {
		t.Fatalf("EnsureLoadBalancer after a concurrent change: %v", err)
	}
	saw412 := false
	for _, r := range h.env.Emulator().Requests() {
		if r.Method == http.MethodPut && r.Status == http.StatusPreconditionFailed {
			saw412 = true
		}
	}
	if !saw412 {
		t.Fatal("the stale write did not get a 412 (the test did not exercise the conflict)")
	}
	lb = h.lb(t, "kubernetes")
	if !hasOwnedFrontend(lb, names.FrontendBase(a)) || !hasOwnedFrontend(lb, names.FrontendBase(b)) || ptr.Deref(lb.Tags["owner"], "") != "someone-else" {
		t.Fatalf("lost an update: a=%v b=%v tag=%q", hasOwnedFrontend(lb, names.FrontendBase(a)), hasOwnedFrontend(lb, names.FrontendBase(b)), ptr.Deref(lb.Tags["owner"], ""))
	}
}

// A Service reconcile never reports success from a stale cache: a rule
// deleted out of band inside the cache TTL is seen and written back when
// the Service is ensured again (the audit's reproduction, issue 32 item 1).
// A node-only update may still trust the cache.
func TestEnsureInsideCacheTTLRepairsOutOfBandChange(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()
	nodes := []*v1.Node{testNode("n1", "10.240.0.4")}
	svc := testService("web", "aaaaaaaa-1111-0000-0000-000000000020", nil, 80, 443)
	if _, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", svc, nodes); err != nil {
		t.Fatal(err)
	}
	lb := h.lb(t, "kubernetes")
	if n := len(lb.Properties.LoadBalancingRules); n != 2 {
		t.Fatalf("rules = %d, want 2", n)
	}
	lb.Properties.LoadBalancingRules = lb.Properties.LoadBalancingRules[:1]
	if _, err := h.clients.LoadBalancer.CreateOrUpdate(ctx, devenv.ResourceGroup, "kubernetes", *lb, ptr.Deref(lb.Etag, "")); err != nil {
		t.Fatal(err)
	}
	h.env.Emulator().ResetRequests()
	if err := h.p.UpdateLoadBalancer(ctx, "kubernetes", svc, nodes); err != nil {
		t.Fatal(err)
	}
	if w := h.writes(); w != 0 {
		t.Fatalf("a node-only update made %d writes, want 0 (it trusts the cache)", w)
	}
	if _, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", svc, nodes); err != nil {
		t.Fatal(err)
	}
	if n := len(h.lb(t, "kubernetes").Properties.LoadBalancingRules); n != 2 {
		t.Fatalf("after EnsureLoadBalancer inside the cache TTL: %d rules, want 2 (success reported from a stale cache)", n)
	}
}

// ARM throttles the load balancer write: the reconcile fails with a
// throttling error, the write gate stays closed (no further requests) until
// Retry-After, and the next reconcile after it succeeds.
func TestThrottledMidReconcile(t *testing.T) {
	ctx := context.Background()
	env := testutil.StartEmulator(t, emulator.Options{}, nil)
	clk := clocktesting.NewFakeClock(time.Now())
	clients := testutil.Clients(t, env, azure.ClientOptions{Clock: clk})
	store := testutil.StartStore(t, lbstore.Options{Config: env.Config, LoadBalancers: clients.LoadBalancer, Pools: clients.BackendPool})
	p, err := New(Options{Config: env.Config, Clients: clients, Store: store, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := env.Emulator().AddFault(emulator.Fault{Method: http.MethodPut, PathRegex: "/loadBalancers/[^/]+$", Count: 1, Status: http.StatusTooManyRequests, Code: "SubscriptionRequestsThrottled", RetryAfter: "30"}); err != nil {
		t.Fatal(err)
	}
	svc := testService("web", "99999999-0000-0000-0000-000000000012", nil, 80)
	nodes := []*v1.Node{testNode("n1", "10.240.0.4")}
	_, err = p.EnsureLoadBalancer(ctx, "kubernetes", svc, nodes)
	if azure.Classify(err) != azure.ClassThrottled {
		t.Fatalf("err = %v (%s), want a throttling error", err, azure.Classify(err))
	}
	// The service controller retries after exactly the Retry-After.
	var re *api.RetryError
	if !errors.As(err, &re) || re.RetryAfter() != 30*time.Second {
		t.Fatalf("err %v: want a RetryError of 30s (got %v)", err, re)
	}
	env.Emulator().ResetRequests()
	if _, err := p.EnsureLoadBalancer(ctx, "kubernetes", svc, nodes); azure.Classify(err) != azure.ClassThrottled {
		t.Fatalf("second attempt inside Retry-After: err = %v, want throttled", err)
	}
	for _, r := range env.Emulator().Requests() {
		if r.Kind == "arm" && r.Method == http.MethodPut && strings.Contains(r.Path, "loadBalancers") {
			t.Fatalf("a load balancer write reached ARM while the write gate was closed: %+v", r)
		}
	}
	clk.Step(31 * time.Second)
	if _, err := p.EnsureLoadBalancer(ctx, "kubernetes", svc, nodes); err != nil {
		t.Fatalf("after Retry-After: %v", err)
	}
}

// The service controller may pass a node list older than a taint the
// admin-state controller already acted on; a pool rewrite must take the
// taint from the node lister and keep the node Down.
func TestPoolRewriteKeepsLatestAdminState(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()
	stale := testNode("n1", "10.240.0.4")
	stale.UID = "uid-n1"
	current := stale.DeepCopy()
	current.Spec.Taints = []v1.Taint{{Key: "node.kubernetes.io/out-of-service", Effect: v1.TaintEffectNoExecute}}
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	if err := idx.Add(current); err != nil {
		t.Fatal(err)
	}
	h.p.nodes = corelisters.NewNodeLister(idx)
	svc := testService("web", "abababab-0000-0000-0000-000000000013", nil, 80)
	if _, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", svc, []*v1.Node{stale}); err != nil {
		t.Fatal(err)
	}
	pool := findPool(h.lb(t, "kubernetes"), "kubernetes")
	if got := backendpool.AdminStateOf(pool.Properties.LoadBalancerBackendAddresses[0]); got != armnetwork.LoadBalancerBackendAddressAdminStateDown {
		t.Fatalf("admin state %s, want Down from the lister's tainted node", got)
	}
}

// With enableLoadBalancerAdminState=false no pool writer sets Down: a
// tainted node's entry is None.
func TestAdminStateDisabledWritesNone(t *testing.T) {
	h := newHarness(t, func(c *config.Config) { c.EnableLoadBalancerAdminState = to.Ptr(false) })
	n := testNode("n1", "10.240.0.4")
	n.Spec.Taints = []v1.Taint{{Key: "node.kubernetes.io/out-of-service", Effect: v1.TaintEffectNoExecute}}
	svc := testService("web", "cdcdcdcd-0000-0000-0000-000000000014", nil, 80)
	if _, err := h.p.EnsureLoadBalancer(context.Background(), "kubernetes", svc, []*v1.Node{n}); err != nil {
		t.Fatal(err)
	}
	pool := findPool(h.lb(t, "kubernetes"), "kubernetes")
	if got := backendpool.AdminStateOf(pool.Properties.LoadBalancerBackendAddresses[0]); got != armnetwork.LoadBalancerBackendAddressAdminStateNone {
		t.Fatalf("admin state %s with the feature disabled, want None", got)
	}
}

// sliceLister serves EndpointSlices that put the Service's ready endpoints
// on the nodes.
func sliceLister(t *testing.T, ns, svc string, nodes ...string) discoverylisters.EndpointSliceLister {
	t.Helper()
	idx := newSliceIndex()
	setSlice(t, idx, ns, svc, nodes...)
	return listerOf(idx)
}

func setSlice(t *testing.T, idx cache.Indexer, ns, svc string, nodes ...string) {
	t.Helper()
	s := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: svc + "-1",
		Labels: map[string]string{discoveryv1.LabelServiceName: svc}}, AddressType: discoveryv1.AddressTypeIPv4}
	for _, n := range nodes {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{"10.244.0.1"}, NodeName: to.Ptr(n)})
	}
	if err := idx.Add(s); err != nil {
		t.Fatal(err)
	}
}

// A Local Service's dedicated pool follows the Service: created with its
// endpoint nodes, dropped when the Service becomes Cluster, registered with
// the updater only while it exists.
func TestLocalServicePoolLifecycle(t *testing.T) {
	h := newHarness(t, func(c *config.Config) {
		c.MultipleStandardLoadBalancerConfigurations = []config.MultipleStandardLoadBalancerConfiguration{{Name: "kubernetes"}}
	})
	h.p.slices = sliceLister(t, "default", "api", "n2")
	ctx := context.Background()
	nodes := []*v1.Node{testNode("n1", "10.240.0.4"), testNode("n2", "10.240.0.5")}
	svc := testService("api", "efefefef-0000-0000-0000-000000000015", nil, 8080)
	svc.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
	svc.Spec.HealthCheckNodePort = 32001
	if _, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", svc, nodes); err != nil {
		t.Fatal(err)
	}
	lb := h.lb(t, "kubernetes")
	if got := poolNames(findPool(lb, "default.api")); strings.Join(got, ",") != "n2" {
		t.Fatalf("dedicated pool members %v, want [n2]", got)
	}
	if findPool(lb, "kubernetes") != nil {
		t.Error("a Local Service created the cluster pool")
	}

	svc.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyCluster
	if _, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", svc, nodes); err != nil {
		t.Fatal(err)
	}
	lb = h.lb(t, "kubernetes")
	if findPool(lb, "default.api") != nil {
		t.Fatal("dedicated pool kept after the Service became Cluster")
	}
	if got := poolNames(findPool(lb, "kubernetes")); len(got) != 2 {
		t.Fatalf("cluster pool members %v, want both nodes", got)
	}
}

func newSliceIndex() cache.Indexer {
	return cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
}

func listerOf(idx cache.Indexer) discoverylisters.EndpointSliceLister {
	return discoverylisters.NewEndpointSliceLister(idx)
}

// TestInterruptedDeleteIsFinished: a delete interrupted after the frontends
// went (a crash, a lost lease) leaves the owned public IP; GetLoadBalancer
// must still report the load balancer so that the service controller calls
// EnsureLoadBalancerDeleted again (found by the chaos suite).
func TestInterruptedDeleteIsFinished(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()
	svc := testService("web", "21111111-2222-3333-4444-555555555555", nil, 80)
	nodes := []*v1.Node{testNode("n1", "10.240.0.4")}
	if _, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", svc, nodes); err != nil {
		t.Fatal(err)
	}
	if err := h.p.removeFromLBs(ctx, callerDeleted, svc, ""); err != nil {
		t.Fatal(err)
	}
	if _, exists, err := h.p.GetLoadBalancer(ctx, "kubernetes", svc); err != nil || !exists {
		t.Fatalf("GetLoadBalancer with the owned public IP left = %v, %v; want exists", exists, err)
	}
	if err := h.p.EnsureLoadBalancerDeleted(ctx, "kubernetes", svc); err != nil {
		t.Fatal(err)
	}
	if _, exists, err := h.p.GetLoadBalancer(ctx, "kubernetes", svc); err != nil || exists {
		t.Fatalf("GetLoadBalancer after the delete = %v, %v; want not exists", exists, err)
	}
	pips, err := h.clients.PublicIP.List(ctx, devenv.ResourceGroup)
	if err != nil {
		t.Fatal(err)
	}
	if len(pips) != 0 {
		t.Fatalf("%d public IPs left, want 0", len(pips))
	}
}

// TestInterruptedMoveToInternal: a move public -> internal interrupted after
// the public frontends went leaves the owned public IP; the next reconcile
// of the (now internal) Service deletes it (found by the chaos suite).
func TestInterruptedMoveToInternal(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()
	svc := testService("web", "31111111-2222-3333-4444-555555555555", nil, 80)
	nodes := []*v1.Node{testNode("n1", "10.240.0.4")}
	if _, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", svc, nodes); err != nil {
		t.Fatal(err)
	}
	if err := h.p.removeFromLBs(ctx, callerDeleted, svc, ""); err != nil {
		t.Fatal(err)
	}
	svc.Annotations = map[string]string{annotations.KeyInternal: "true"}
	if _, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", svc, nodes); err != nil {
		t.Fatal(err)
	}
	pips, err := h.clients.PublicIP.List(ctx, devenv.ResourceGroup)
	if err != nil {
		t.Fatal(err)
	}
	if len(pips) != 0 {
		t.Fatalf("%d public IPs left for an internal Service, want 0", len(pips))
	}
}
