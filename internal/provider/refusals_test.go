package provider

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"

	"github.com/azlb/azlb/internal/annotations"
	"github.com/azlb/azlb/internal/azure"
	"github.com/azlb/azlb/internal/config"
	"github.com/azlb/azlb/internal/devenv"
	"github.com/azlb/azlb/internal/emulator"
	"github.com/azlb/azlb/internal/names"
	"github.com/azlb/azlb/internal/privatelink"
	"github.com/azlb/azlb/internal/securitygroup"
	"github.com/azlb/azlb/internal/testutil"
)

// refusalHarness is a provider with every writer (load balancers, the NSG,
// Private Link Services) and a Service lister the test fills.
type refusalHarness struct {
	*sgHarness
	svcs *sharedServices
}

func newRefusalHarness(t *testing.T) *refusalHarness {
	t.Helper()
	h := newSGHarness(t, nil)
	h.p.pls = startPrivateLinks(t, h.harness)
	h.p.nodes = nodeLister(sgNodes...)
	return &refusalHarness{sgHarness: h, svcs: newSharedServices(h.harness)}
}

// ruleNames are the names of the rules, sorted.
func ruleNames(m map[string]*armnetwork.SecurityRule) []string { return slices.Sorted(maps.Keys(m)) }

// ensure runs EnsureLoadBalancer with the Service in the lister.
func (h *refusalHarness) ensure(t *testing.T, svc *v1.Service) error {
	t.Helper()
	h.svcs.add(svc)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", svc, sgNodes)
	return err
}

// armWrites lists the ARM writes since the request log was reset.
func (h *refusalHarness) armWrites() []string {
	var out []string
	for _, r := range h.env.Emulator().Requests() {
		if r.Kind == "arm" && r.Method != http.MethodGet && r.Method != http.MethodHead {
			out = append(out, r.Method+" "+r.Path)
		}
	}
	return out
}

// wantRefused requires a refusal naming want, exactly one Warning event
// (reason, naming want) and no ARM write at all.
func (h *refusalHarness) wantRefused(t *testing.T, svc *v1.Service, reason, want string) {
	t.Helper()
	h.env.Emulator().ResetRequests()
	h.events()
	err := h.ensure(t, svc)
	if !IsRefusal(err) || !strings.Contains(err.Error(), want) {
		t.Fatalf("%s: err = %v, want a refusal naming %q", svc.Name, err, want)
	}
	evs := h.events()
	warnings := 0
	for _, e := range evs {
		if strings.HasPrefix(e, "Warning ") {
			warnings++
		}
	}
	if warnings != 1 || !strings.HasPrefix(evs[0], "Warning "+reason+" ") || !strings.Contains(evs[0], want) {
		t.Fatalf("%s: events %q, want one Warning %s naming %q", svc.Name, evs, reason, want)
	}
	if w := h.armWrites(); len(w) != 0 {
		t.Fatalf("%s: a refused Service wrote %v", svc.Name, w)
	}
	// Again (the service controller retries): no second Warning, no write.
	if err := h.ensure(t, svc); !IsRefusal(err) {
		t.Fatalf("%s: retry: %v", svc.Name, err)
	}
	if evs := h.events(); len(evs) != 0 {
		t.Fatalf("%s: a retry repeated events %q", svc.Name, evs)
	}
	if w := h.armWrites(); len(w) != 0 {
		t.Fatalf("%s: a retry wrote %v", svc.Name, w)
	}
}

// Issue 37, items 1, 2, 3 and 8: a Service azlb refuses is refused whole,
// before the first write: one Warning naming the field and value, and no
// public IP, frontend, rule, security rule or Private Link Service. Then a
// restarted controller (new writers, the start's collection) writes
// nothing for them either.
func TestRefusedServicesWriteNothing(t *testing.T) {
	h := newRefusalHarness(t)
	uid := 0
	mk := func(ann map[string]string, ports ...int32) *v1.Service {
		uid++
		return testService(fmt.Sprintf("r%d", uid), fmt.Sprintf("d%07d-2222-3333-4444-555555555555", uid), ann, ports...)
	}
	internal := func(kv ...string) map[string]string {
		a := map[string]string{annotations.KeyInternal: "true", privatelink.KeyCreate: "true"}
		for i := 0; i+1 < len(kv); i += 2 {
			a[kv[i]] = kv[i+1]
		}
		return a
	}
	var refused []*v1.Service
	check := func(svc *v1.Service, reason, want string) {
		t.Helper()
		h.wantRefused(t, svc, reason, want)
		refused = append(refused, svc)
	}
	// Item 1: a Private Link Service on a public Service.
	check(mk(map[string]string{privatelink.KeyCreate: "true"}, 80), privatelink.EventReasonInvalid, privatelink.KeyCreate)
	// Item 1: each invalid azure-pls-* value on an internal Service, and
	// (item 8) a NAT address outside its subnet and a subnet that does not
	// exist, read from Azure.
	for _, kv := range [][2]string{
		{privatelink.KeyCreate, "yes"}, {privatelink.KeyName, "-bad"}, {privatelink.KeyResourceGroup, "bad/rg"},
		{privatelink.KeySubnet, "sub/net"}, {privatelink.KeyIPCount, "9"}, {privatelink.KeyIPCount, "x"},
		{privatelink.KeyIPAddresses, "10.0.0.300"}, {privatelink.KeyIPAddresses, "2001:db8::1"}, {privatelink.KeyFQDNs, "a..example.com"},
		{privatelink.KeyProxyProtocol, "on"}, {privatelink.KeyVisibility, "not-a-guid"}, {privatelink.KeyVisibility, "* 11111111-2222-3333-4444-555555555555"},
		{privatelink.KeyAutoApproval, "11111111-2222-3333-4444-555555555555"},
		{privatelink.KeyIPAddresses, "10.99.0.10"}, {privatelink.KeySubnet, "no-such-subnet"},
	} {
		check(mk(internal(kv[0], kv[1]), 80), privatelink.EventReasonInvalid, kv[0])
	}
	// Item 2: an SCTP port on a public Service.
	sctp := mk(nil, 80)
	sctp.Spec.Ports = append(sctp.Spec.Ports, v1.ServicePort{Port: 9, Protocol: v1.ProtocolSCTP, NodePort: 30009})
	check(sctp, EventReasonUnsupportedProtocol, "SCTP")
	// Item 3: over the NSG's limits.
	big := mk(nil, 80)
	for i := 0; i < securitygroup.MaxSourcePrefixes+1; i++ {
		big.Spec.LoadBalancerSourceRanges = append(big.Spec.LoadBalancerSourceRanges, fmt.Sprintf("10.%d.%d.%d/32", i/16384, i/64%256, i%64*4))
	}
	check(big, EventReasonSecurityRuleLimitExceeded, "limit of 4000")
	// Others: a public IP address nobody has, a prefix that does not exist.
	check(mk(map[string]string{annotations.KeyIPv4: "203.0.113.77"}, 80), EventReasonPublicIPNotFound, "203.0.113.77")
	check(mk(map[string]string{annotations.KeyPIPPrefixID: "/subscriptions/" + h.env.Config.SubscriptionID + "/resourceGroups/" + devenv.ResourceGroup +
		"/providers/Microsoft.Network/publicIPPrefixes/nope"}, 80), EventReasonPublicIPPrefixUnusable, annotations.KeyPIPPrefixID)

	for _, lb := range []string{"kubernetes", "kubernetes-internal"} {
		if got := h.lb(t, lb); got != nil {
			t.Errorf("load balancer %s exists with %d frontends", lb, frontendCount(got))
		}
	}
	if rules := h.rules(t); len(rules) != 0 {
		t.Errorf("security rules written: %v", ruleNames(rules))
	}
	pips, err := h.clients.PublicIP.List(context.Background(), devenv.ResourceGroup)
	if err != nil {
		t.Fatal(err)
	}
	for _, pip := range pips {
		t.Errorf("public IP %s created", ptr.Deref(pip.Name, ""))
	}

	// A second start after these refusals writes nothing.
	h.env.Emulator().ResetRequests()
	restarted := newSGProvider(t, h.env.Config, h.clients, h.recorder)
	restarted.pls, restarted.nodes = h.p.pls, h.p.nodes
	restarted.SetServiceLister(serviceLister(refused...))
	h.p = restarted
	for _, svc := range refused {
		if err := h.ensure(t, svc); !IsRefusal(err) {
			t.Fatalf("%s after a restart: %v", svc.Name, err)
		}
	}
	if w := h.armWrites(); len(w) != 0 {
		t.Fatalf("a second start wrote %v", w)
	}
}

// Issue 37, item 8: a source-range annotation set to "" is not "no
// restriction": a Warning naming it, and the Service fails closed (no
// Internet rule, a deny-all on its address).
func TestBlankRangeAnnotationFailsClosed(t *testing.T) {
	h := newRefusalHarness(t)
	svc := testService("blank", "e1111111-2222-3333-4444-555555555555", map[string]string{annotations.KeyAllowedIPRanges: ""}, 80)
	if err := h.ensure(t, svc); err != nil {
		t.Fatal(err)
	}
	evs := h.events()
	if !hasEvent(evs, "Warning "+EventReasonInvalidSourceRanges) || !strings.Contains(strings.Join(evs, "\n"), annotations.KeyAllowedIPRanges) {
		t.Errorf("events %q, want a Warning %s naming %s", evs, EventReasonInvalidSourceRanges, annotations.KeyAllowedIPRanges)
	}
	rules := h.rules(t)
	for n, r := range rules {
		if strings.Contains(strings.Join(ruleSources(r), ","), "Internet") {
			t.Errorf("rule %s allows Internet", n)
		}
	}
	if rules[securitygroup.DenyRuleName(securitygroup.IPv4)] == nil {
		t.Errorf("no deny-all: %v", ruleNames(rules))
	}
}

// Issue 37, item 8: an IPv4 Service whose only ranges are IPv6 is closed,
// and a Warning says why, once.
func TestOtherFamilyRangesAreAWarning(t *testing.T) {
	h := newRefusalHarness(t)
	svc := testService("v6only", "e2111111-2222-3333-4444-555555555555", nil, 80)
	svc.Spec.LoadBalancerSourceRanges = []string{"2001:db8::/32"}
	if err := h.ensure(t, svc); err != nil {
		t.Fatal(err)
	}
	if evs := h.events(); !hasEvent(evs, "Warning "+EventReasonNoSourceOfFamily) || !strings.Contains(strings.Join(evs, "\n"), "IPv4") {
		t.Errorf("events %q, want a Warning %s naming IPv4", evs, EventReasonNoSourceOfFamily)
	}
	if err := h.ensure(t, svc); err != nil {
		t.Fatal(err)
	}
	if evs := h.events(); hasEvent(evs, "Warning "+EventReasonNoSourceOfFamily) {
		t.Errorf("the Warning was repeated: %q", evs)
	}
	for n, r := range h.rules(t) {
		if strings.Contains(strings.Join(ruleSources(r), ","), "Internet") {
			t.Errorf("rule %s allows Internet", n)
		}
	}
}

// A Service already served that gets a bad change keeps serving as it was:
// its load balancer and public IP stay as they are (status kept: the
// service controller keeps it on an error), except that an access setting
// made invalid fails closed at once (narrowed rules, a deny-all). The drift
// pass counts the refusal as no failure and repeats no Warning (issue 37,
// item 8).
func TestServedServiceKeepsServingOnRefusal(t *testing.T) {
	h := newRefusalHarness(t)
	ctx := context.Background()
	svc := testService("web", "e3111111-2222-3333-4444-555555555555", nil, 80)
	svc.Finalizers = []string{serviceCleanupFinalizer}
	svc.Spec.LoadBalancerSourceRanges = []string{"203.0.113.0/24"}
	if err := h.ensure(t, svc); err != nil {
		t.Fatal(err)
	}
	lbBefore := propsJSON(t, h.lb(t, "kubernetes").Properties)
	rulesBefore := len(h.rules(t))
	h.events()

	// A bad change: an SCTP port. Nothing changes.
	bad := svc.DeepCopy()
	bad.Generation = 2
	bad.Spec.Ports = append(bad.Spec.Ports, v1.ServicePort{Port: 9, Protocol: v1.ProtocolSCTP, NodePort: 30009})
	h.wantRefused(t, bad, EventReasonUnsupportedProtocol, "SCTP")
	if got := propsJSON(t, h.lb(t, "kubernetes").Properties); got != lbBefore {
		t.Errorf("the load balancer changed on a refused change")
	}
	if n := len(h.rules(t)); n != rulesBefore {
		t.Errorf("security rules %d, want %d", n, rulesBefore)
	}

	// The drift pass: no failure, no Warning, nothing written.
	h.env.Emulator().ResetRequests()
	pctx, _, err := h.p.BeginRepairPass(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rs, err := h.p.RepairService(pctx, bad, sgNodes); err != nil || len(rs) != 0 {
		t.Fatalf("drift repair of a refused Service: %v %v, want nothing and no error", rs, err)
	}
	if evs := h.events(); len(evs) != 0 {
		t.Errorf("the drift pass recorded %q", evs)
	}
	if w := h.armWrites(); len(w) != 0 {
		t.Errorf("the drift pass wrote %v", w)
	}

	// A bad change that also makes the access setting invalid (ranges in
	// the spec and an annotation): the security rules fail closed at once,
	// the load balancer stays.
	worse := bad.DeepCopy()
	worse.Generation = 3
	worse.Annotations = map[string]string{annotations.KeyAllowedIPRanges: "198.51.100.0/24"}
	if err := h.ensure(t, worse); !IsRefusal(err) {
		t.Fatalf("err = %v, want a refusal", err)
	}
	if got := propsJSON(t, h.lb(t, "kubernetes").Properties); got != lbBefore {
		t.Errorf("the load balancer changed on a refused change")
	}
	rules := h.rules(t)
	for n, r := range rules {
		if !strings.HasPrefix(n, securitygroup.RulePrefix+"_deny") {
			t.Errorf("allow rule %s (%v) kept after the access settings became invalid", n, ruleSources(r))
		}
	}
	if rules[securitygroup.DenyRuleName(securitygroup.IPv4)] == nil {
		t.Errorf("no deny-all after the access settings became invalid: %v", ruleNames(rules))
	}
	// Fixed: served as asked again.
	fixed := svc.DeepCopy()
	fixed.Generation = 4
	fixed.Spec.LoadBalancerSourceRanges = []string{"198.51.100.0/24"}
	if err := h.ensure(t, fixed); err != nil {
		t.Fatal(err)
	}
	if h.rules(t)[securitygroup.AllowRuleName(securitygroup.IPv4, "Tcp", []string{"198.51.100.0/24"}, []string{"80"})] == nil {
		t.Errorf("the fixed Service's rule is missing: %v", ruleNames(h.rules(t)))
	}
}

// A refused Service that has no frontend gets what azlb left of it before
// collected: a public IP it created (issue 37: an owned public IP of a
// refused Service, left by an earlier version).
func TestRefusedServiceLeftoversCollected(t *testing.T) {
	h := newRefusalHarness(t)
	svc := testService("left", "e4111111-2222-3333-4444-555555555555", nil, 80)
	name := names.PublicIP(h.env.Config.ClusterName, svc, v1.IPv4Protocol)
	putPublicIP(t, h.harness, devenv.ResourceGroup, name, map[string]*string{
		names.TagServiceName: ptr.To(names.ServiceKey(svc)), names.TagClusterName: ptr.To(h.env.Config.ClusterName)}, nil)
	svc.Spec.Ports = append(svc.Spec.Ports, v1.ServicePort{Port: 9, Protocol: v1.ProtocolSCTP, NodePort: 30009})
	if err := h.ensure(t, svc); !IsRefusal(err) {
		t.Fatalf("err = %v, want a refusal", err)
	}
	if _, err := h.clients.PublicIP.Get(context.Background(), devenv.ResourceGroup, name); azure.Classify(err) != azure.ClassStale {
		t.Errorf("the refused Service's public IP %s stays (%v)", name, err)
	}
}

// Issue 37, item 4: an out-of-band widening of a Service's security rule is
// rewritten at the next NSG write of any other Service, not left to the
// drift pass.
func TestTamperedRuleRepairedByAnotherServicesWrite(t *testing.T) {
	h := newRefusalHarness(t)
	ctx := context.Background()
	restricted := testService("restricted", "e5111111-2222-3333-4444-555555555555", nil, 80)
	restricted.Spec.LoadBalancerSourceRanges = []string{"203.0.113.0/24"}
	if err := h.ensure(t, restricted); err != nil {
		t.Fatal(err)
	}
	name := securitygroup.AllowRuleName(securitygroup.IPv4, "Tcp", []string{"203.0.113.0/24"}, []string{"80"})
	sg, err := h.clients.SecurityGroup.Get(ctx, devenv.ResourceGroup, devenv.SecurityGroupName)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range sg.Properties.SecurityRules {
		if *r.Name == name {
			r.Properties.SourceAddressPrefix = ptr.To("*")
		}
	}
	if _, err := h.clients.SecurityGroup.CreateOrUpdate(ctx, devenv.ResourceGroup, devenv.SecurityGroupName, *sg, ""); err != nil {
		t.Fatal(err)
	}
	other := testService("other", "e6111111-2222-3333-4444-555555555555", nil, 8080)
	if err := h.ensure(t, other); err != nil {
		t.Fatal(err)
	}
	rules := h.rules(t)
	for n, r := range rules {
		if strings.Contains(strings.Join(ruleSources(r), ","), "*") {
			t.Errorf("rule %s still allows source * after another Service's write", n)
		}
	}
	if r := rules[name]; r == nil || strings.Join(ruleSources(r), ",") != "203.0.113.0/24" {
		t.Errorf("rule %s = %v, want it rewritten to 203.0.113.0/24", name, r)
	}
}

// Issue 37, item 7: no DriftRepaired while Azure refuses the write it
// would report: with every load balancer PUT failing, a pass that finds a
// rule missing reports no load balancer repair.
func TestNoRepairReportedForARefusedWrite(t *testing.T) {
	h := newRefusalHarness(t)
	ctx := context.Background()
	svc := testService("web", "e7111111-2222-3333-4444-555555555555", nil, 80, 443)
	svc.Finalizers = []string{serviceCleanupFinalizer}
	if err := h.ensure(t, svc); err != nil {
		t.Fatal(err)
	}
	lb := h.lb(t, "kubernetes")
	lb.Properties.LoadBalancingRules = lb.Properties.LoadBalancingRules[:1]
	if _, err := h.clients.LoadBalancer.CreateOrUpdate(ctx, devenv.ResourceGroup, "kubernetes", *lb, ptr.Deref(lb.Etag, "")); err != nil {
		t.Fatal(err)
	}
	if _, err := h.env.Emulator().AddFault(emulator.Fault{Method: http.MethodPut, PathRegex: "(?i)/loadBalancers/kubernetes$", Status: http.StatusInternalServerError, Code: "InternalServerError"}); err != nil {
		t.Fatal(err)
	}
	pctx, _, err := h.p.BeginRepairPass(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rs, err := h.p.RepairService(pctx, svc, sgNodes)
	if err == nil {
		t.Fatal("the repair succeeded while every load balancer PUT fails")
	}
	for _, r := range rs {
		if r.Kind == RepairLoadBalancer {
			t.Errorf("repair reported %v while Azure refused the write", r)
		}
	}
}

// A shared internal frontend keeps its owner's Private Link Service when
// the owner leaves first (the other Service still uses it); when its last
// user leaves, the write that removes the frontend is preceded by the
// Private Link Service's deletion: Azure refuses to remove a frontend a
// Private Link Service uses (found by the differential test, seed 37).
func TestSharedFrontendPrivateLinkGoesWithItsLastUser(t *testing.T) {
	h := newRefusalHarness(t)
	ctx := context.Background()
	addr := "10.240.0.200"
	owner := testService("owner", "e8111111-2222-3333-4444-555555555555", map[string]string{annotations.KeyInternal: "true",
		annotations.KeyIPv4: addr, privatelink.KeyCreate: "true"}, 80)
	user := testService("user", "e9111111-2222-3333-4444-555555555555", map[string]string{annotations.KeyInternal: "true",
		annotations.KeyIPv4: addr}, 8080)
	for _, s := range []*v1.Service{owner, user} {
		if err := h.ensure(t, s); err != nil {
			t.Fatalf("%s: %v", s.Name, err)
		}
	}
	h.svcs.remove(owner)
	if err := h.p.EnsureLoadBalancerDeleted(ctx, "kubernetes", owner); err != nil {
		t.Fatalf("delete the owner: %v", err)
	}
	h.svcs.remove(user)
	if err := h.p.EnsureLoadBalancerDeleted(ctx, "kubernetes", user); err != nil {
		t.Fatalf("delete the last user: %v", err)
	}
	if lb := h.lb(t, "kubernetes-internal"); lb != nil {
		t.Errorf("kubernetes-internal left with %d frontends", frontendCount(lb))
	}
	all, err := h.p.pls.Manager().Store().List(ctx, devenv.ResourceGroup)
	if err != nil {
		t.Fatal(err)
	}
	for _, pls := range all {
		t.Errorf("Private Link Service %s left", ptr.Deref(pls.Name, ""))
	}
}

// An internal Service with a Private Link Service that moves to another
// load balancer keeps being served: its plan sees the name of its Private
// Link Service (the default, after its frontend) held by the one its move
// deletes first, which is no conflict (found by test/e2e
// TestPrivateLinkService once the plan checked names before the move).
func TestPrivateLinkServiceMovesWithItsService(t *testing.T) {
	env := testutil.StartEmulator(t, emulator.Options{}, func(c *config.Config) {
		c.MultipleStandardLoadBalancerConfigurations = []config.MultipleStandardLoadBalancerConfiguration{{Name: "kubernetes"}, {Name: "lb-2"}}
	})
	clients := testutil.Clients(t, env, azure.ClientOptions{})
	rec := record.NewFakeRecorder(1000)
	h := &refusalHarness{sgHarness: &sgHarness{&harness{env: env, clients: clients, recorder: rec, p: newSGProvider(t, env.Config, clients, rec)}}}
	h.p.pls = startPrivateLinks(t, h.harness)
	h.p.nodes = nodeLister(sgNodes...)
	h.svcs = newSharedServices(h.harness)
	svc := testService("mover", "ea111111-2222-3333-4444-555555555555", map[string]string{annotations.KeyInternal: "true",
		privatelink.KeyCreate: "true", annotations.KeyLoadBalancerConfigurations: "kubernetes"}, 80)
	if err := h.ensure(t, svc); err != nil {
		t.Fatal(err)
	}
	moved := svc.DeepCopy()
	moved.Annotations[annotations.KeyLoadBalancerConfigurations] = "lb-2"
	if err := h.ensure(t, moved); err != nil {
		t.Fatalf("the move: %v", err)
	}
	all, err := h.p.pls.Manager().Store().List(context.Background(), devenv.ResourceGroup)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 1 || !strings.Contains(strings.ToLower(privatelink.FrontendOf(all[0])), "/loadbalancers/lb-2-internal/") {
		var fes []string
		for _, p := range all {
			fes = append(fes, privatelink.FrontendOf(p))
		}
		t.Fatalf("Private Link Services on %v, want one on lb-2-internal", fes)
	}
}
