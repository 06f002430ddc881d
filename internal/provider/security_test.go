package provider

import (
	"context"
	"errors"
	"fmt"
	"k8s.io/apimachinery/pkg/util/wait"
	"net/http"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"

	"github.com/azlb/azlb/internal/accesscontrol"
	"github.com/azlb/azlb/internal/azure"
	"github.com/azlb/azlb/internal/config"
	"github.com/azlb/azlb/internal/devenv"
	"github.com/azlb/azlb/internal/emulator"
	"github.com/azlb/azlb/internal/lbstore"
	"github.com/azlb/azlb/internal/names"
	"github.com/azlb/azlb/internal/securitygroup"
	"github.com/azlb/azlb/internal/testutil"
)

// sgHarness is a provider that writes the seeded NSG (devenv.SecurityGroupName).
type sgHarness struct {
	*harness
}

func newSGHarness(t *testing.T, mutate func(*config.Config)) *sgHarness {
	t.Helper()
	env := testutil.StartEmulator(t, emulator.Options{}, mutate)
	clients := testutil.Clients(t, env, azure.ClientOptions{})
	h := &harness{env: env, clients: clients, recorder: record.NewFakeRecorder(1000)}
	h.p = newSGProvider(t, env.Config, clients, h.recorder)
	env.Emulator().ResetRequests()
	return &sgHarness{h}
}

// newSGProvider builds a provider with a running NSG writer (as a
// restarted controller would: new stores).
func newSGProvider(t testing.TB, cfg *config.Config, clients *azure.Clients, rec record.EventRecorder) *Provider {
	t.Helper()
	store := testutil.StartStore(t, lbstore.Options{Config: cfg, LoadBalancers: clients.LoadBalancer, Pools: clients.BackendPool})
	sg := testutil.StartSecurityGroups(t, cfg, clients.SecurityGroup)
	p, err := New(Options{Config: cfg, Clients: clients, Store: store, Recorder: rec, SecurityGroups: sg})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func (h *sgHarness) rules(t *testing.T) map[string]*armnetwork.SecurityRule {
	t.Helper()
	sg, err := h.clients.SecurityGroup.Get(context.Background(), devenv.ResourceGroup, devenv.SecurityGroupName)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*armnetwork.SecurityRule{}
	for _, r := range sg.Properties.SecurityRules {
		out[*r.Name] = r
	}
	return out
}

func (h *sgHarness) nsgWrites() int {
	n := 0
	for _, r := range h.env.Emulator().Requests() {
		if r.Kind == "arm" && r.Method != http.MethodGet && strings.Contains(strings.ToLower(r.Path), "networksecuritygroups") {
			n++
		}
	}
	return n
}

// events drains the recorder.
func (h *sgHarness) events() []string {
	var out []string
	for {
		select {
		case e := <-h.recorder.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func hasEvent(events []string, prefix string) bool {
	for _, e := range events {
		if strings.HasPrefix(e, prefix) {
			return true
		}
	}
	return false
}

func nodeLister(nodes ...*v1.Node) corelisters.NodeLister {
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, n := range nodes {
		_ = idx.Add(n)
	}
	return corelisters.NewNodeLister(idx)
}

func ruleDests(r *armnetwork.SecurityRule) []string {
	var out []string
	if r.Properties.DestinationAddressPrefix != nil {
		out = append(out, *r.Properties.DestinationAddressPrefix)
	}
	for _, d := range r.Properties.DestinationAddressPrefixes {
		out = append(out, *d)
	}
	sort.Strings(out)
	return out
}

func ruleSources(r *armnetwork.SecurityRule) []string {
	var out []string
	if r.Properties.SourceAddressPrefix != nil {
		out = append(out, *r.Properties.SourceAddressPrefix)
	}
	for _, d := range r.Properties.SourceAddressPrefixes {
		out = append(out, *d)
	}
	sort.Strings(out)
	return out
}

var sgNodes = []*v1.Node{testNode("n1", "10.240.0.4"), testNode("n2", "10.240.0.5")}

func TestSecurityRulesPublicAndRanges(t *testing.T) {
	h := newSGHarness(t, nil)
	ctx := context.Background()
	svc := testService("web", "11111111-2222-3333-4444-555555555555", nil, 80, 443)
	st, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", svc, sgNodes)
	if err != nil {
		t.Fatal(err)
	}
	ip := st.Ingress[0].IP
	svc.Status.LoadBalancer = *st
	open := securitygroup.AllowRuleName(securitygroup.IPv4, "Tcp", []string{"Internet"}, []string{"80", "443"})
	rules := h.rules(t)
	if r := rules[open]; len(rules) != 1 || r == nil || strings.Join(ruleDests(r), ",") != ip || *r.Properties.Priority != 500 {
		t.Fatalf("rules = %v, want %s to %s", rules, open, ip)
	}
	if ev := h.events(); !hasEvent(ev, "Normal SecurityRulesUpdated") {
		t.Errorf("events = %v", ev)
	}

	// Restricted to two ranges: the Internet rule goes, one rule with the
	// merged ranges comes.
	svc.Spec.LoadBalancerSourceRanges = []string{"203.0.113.0/25", "203.0.113.128/25", "198.51.100.0/24"}
	if _, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", svc, sgNodes); err != nil {
		t.Fatal(err)
	}
	rules = h.rules(t)
	restricted := securitygroup.AllowRuleName(securitygroup.IPv4, "Tcp", []string{"198.51.100.0/24", "203.0.113.0/24"}, []string{"80", "443"})
	if r := rules[restricted]; len(rules) != 1 || r == nil || strings.Join(ruleSources(r), ",") != "198.51.100.0/24,203.0.113.0/24" {
		t.Fatalf("rules = %v, want only %s", rules, restricted)
	}

	// Nothing changed: no NSG write.
	h.env.Emulator().ResetRequests()
	if _, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", svc, sgNodes); err != nil {
		t.Fatal(err)
	}
	if n := h.nsgWrites(); n != 0 {
		t.Errorf("unchanged Service: %d NSG writes", n)
	}

	// A restart (new stores, empty caches): nothing written either.
	h.env.Emulator().ResetRequests()
	p2 := newSGProvider(t, h.env.Config, h.clients, record.NewFakeRecorder(100))
	p2.nodes = nodeLister(sgNodes...)
	if _, err := p2.EnsureLoadBalancer(ctx, "kubernetes", svc, sgNodes); err != nil {
		t.Fatal(err)
	}
	if n := h.nsgWrites(); n != 0 {
		t.Errorf("restart: %d NSG writes, want 0", n)
	}

	// Deleted: its rules go.
	if err := h.p.EnsureLoadBalancerDeleted(ctx, "kubernetes", svc); err != nil {
		t.Fatal(err)
	}
	if rules := h.rules(t); len(rules) != 0 {
		t.Errorf("rules left after delete: %v", rules)
	}
}

func TestSecurityRulesInternalAndDisabled(t *testing.T) {
	h := newSGHarness(t, nil)
	ctx := context.Background()
	internal := testService("ilb", "21111111-2222-3333-4444-555555555555", map[string]string{"service.beta.kubernetes.io/azure-load-balancer-internal": "true"}, 80)
	if _, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", internal, sgNodes); err != nil {
		t.Fatal(err)
	}
	disabled := testService("mine", "31111111-2222-3333-4444-555555555555", map[string]string{accesscontrol.KeyDisableNSGRule: "true"}, 80)
	if _, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", disabled, sgNodes); err != nil {
		t.Fatal(err)
	}
	if rules := h.rules(t); len(rules) != 0 {
		t.Errorf("internal and nsg-rule-disabled Services got rules: %v", rules)
	}
}

// An invalid range fails closed: the valid ranges are allowed, there is no
// Internet rule, a deny-all covers the address, and the event names the
// value.
func TestSecurityRulesInvalidRangeFailsClosed(t *testing.T) {
	h := newSGHarness(t, nil)
	ctx := context.Background()
	svc := testService("web", "41111111-2222-3333-4444-555555555555", nil, 80)
	svc.Spec.LoadBalancerSourceRanges = []string{"10.0.0.1/24", "198.51.100.0/24"}
	st, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", svc, sgNodes)
	if err != nil {
		t.Fatal(err)
	}
	ip := st.Ingress[0].IP
	rules := h.rules(t)
	allow := rules[securitygroup.AllowRuleName(securitygroup.IPv4, "Tcp", []string{"198.51.100.0/24"}, []string{"80"})]
	deny := rules[securitygroup.DenyRuleName(securitygroup.IPv4)]
	if len(rules) != 2 || allow == nil || deny == nil || strings.Join(ruleDests(deny), ",") != ip || *deny.Properties.Priority != 4095 {
		t.Fatalf("rules = %v", rules)
	}
	ev := h.events()
	if !hasEvent(ev, `Warning InvalidSourceRanges Invalid source range spec.loadBalancerSourceRanges[0]: "10.0.0.1/24"`) {
		t.Errorf("events = %v", ev)
	}
}

// Contradictory settings write nothing at all, not even the frontend.
func TestSecurityRulesConflictWritesNothing(t *testing.T) {
	h := newSGHarness(t, nil)
	ctx := context.Background()
	svc := testService("web", "51111111-2222-3333-4444-555555555555", map[string]string{accesscontrol.KeyAllowedIPRanges: "10.0.0.0/8"}, 80)
	svc.Spec.LoadBalancerSourceRanges = []string{"10.0.0.0/8"}
	_, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", svc, sgNodes)
	var ce *accesscontrol.ConflictError
	if !errors.As(err, &ce) {
		t.Fatalf("err = %v", err)
	}
	if w := h.writes(); w != 0 {
		t.Errorf("%d ARM writes for a conflicting Service", w)
	}
	if ev := h.events(); !hasEvent(ev, "Warning ConflictingAccessConfiguration") {
		t.Errorf("events = %v", ev)
	}
}

// Without an NSG writer a restricted Service is refused before anything is
// written; an unrestricted public one is served with a warning when
// securityGroupName is empty.
func TestSecurityGroupNotConfigured(t *testing.T) {
	h := newHarness(t, func(c *config.Config) { c.SecurityGroupName = "" })
	h.recorder = record.NewFakeRecorder(100)
	h.p.recorder = h.recorder
	ctx := context.Background()
	restricted := testService("web", "61111111-2222-3333-4444-555555555555", nil, 80)
	restricted.Spec.LoadBalancerSourceRanges = []string{"10.0.0.0/8"}
	if _, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", restricted, sgNodes); !errors.Is(err, ErrSecurityGroupNotConfigured) {
		t.Fatalf("err = %v", err)
	}
	if w := h.writes(); w != 0 {
		t.Errorf("%d ARM writes for a restricted Service without an NSG", w)
	}
	open := testService("open", "71111111-2222-3333-4444-555555555555", nil, 80)
	if _, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", open, sgNodes); err != nil {
		t.Fatal(err)
	}
	ev := (&sgHarness{h}).events()
	if !hasEvent(ev, "Warning SecurityGroupNotConfigured the Service restricts its sources") || !hasEvent(ev, "Warning SecurityGroupNotConfigured azure.json securityGroupName is empty") {
		t.Errorf("events = %v", ev)
	}
}

// Floating IP off: destinations are the nodes and the node ports.
func TestSecurityRulesFloatingIPOff(t *testing.T) {
	h := newSGHarness(t, nil)
	ctx := context.Background()
	svc := testService("web", "81111111-2222-3333-4444-555555555555", map[string]string{"service.beta.kubernetes.io/azure-disable-load-balancer-floating-ip": "true"}, 80)
	svc.Spec.LoadBalancerSourceRanges = []string{"10.0.0.0/8"}
	if _, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", svc, sgNodes); err != nil {
		t.Fatal(err)
	}
	r := h.rules(t)[securitygroup.AllowRuleName(securitygroup.IPv4, "Tcp", []string{"10.0.0.0/8"}, []string{"30080"})]
	if r == nil || strings.Join(ruleDests(r), ",") != "10.240.0.4,10.240.0.5" {
		t.Fatalf("rule = %+v", r)
	}
	// A node joins: the node sync adds it.
	nodes := append(append([]*v1.Node(nil), sgNodes...), testNode("n3", "10.240.0.6"))
	if err := h.p.UpdateLoadBalancer(ctx, "kubernetes", svc, nodes); err != nil {
		t.Fatal(err)
	}
	r = h.rules(t)[securitygroup.AllowRuleName(securitygroup.IPv4, "Tcp", []string{"10.0.0.0/8"}, []string{"30080"})]
	if r == nil || strings.Join(ruleDests(r), ",") != "10.240.0.4,10.240.0.5,10.240.0.6" {
		t.Fatalf("after node add: %+v", r)
	}
}

// A cluster whose rules the Azure cloud provider laid out is taken over
// with no rule change: the rules below are written by hand from
// docs/security-groups.md (names from md5sum).
func TestSecurityRulesTakeover(t *testing.T) {
	h := newSGHarness(t, nil)
	ctx := context.Background()
	web := testService("web", "91111111-2222-3333-4444-555555555555", nil, 80)
	st, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", web, sgNodes)
	if err != nil {
		t.Fatal(err)
	}
	web.Status.LoadBalancer = *st
	ip := st.Ingress[0].IP
	// Replace azlb's rules by a hand-made upstream layout, plus a rule of
	// someone else's.
	sg, err := h.clients.SecurityGroup.Get(ctx, devenv.ResourceGroup, devenv.SecurityGroupName)
	if err != nil {
		t.Fatal(err)
	}
	sg.Properties.SecurityRules = []*armnetwork.SecurityRule{
		{Name: ptr.To("k8s-azure-lb_allow_IPv4_d39272f7f57ed937951650d93992ad77"), // md5("Tcp_Internet_80")
			Properties: &armnetwork.SecurityRulePropertiesFormat{Priority: ptr.To[int32](502), Direction: ptr.To(armnetwork.SecurityRuleDirectionInbound),
				Access: ptr.To(armnetwork.SecurityRuleAccessAllow), Protocol: ptr.To(armnetwork.SecurityRuleProtocolTCP), SourceAddressPrefix: ptr.To("Internet"),
				SourcePortRange: ptr.To("*"), DestinationAddressPrefix: ptr.To(ip), DestinationPortRanges: []*string{ptr.To("80")}}},
		{Name: ptr.To("allow-ssh"), Properties: &armnetwork.SecurityRulePropertiesFormat{Priority: ptr.To[int32](100), Direction: ptr.To(armnetwork.SecurityRuleDirectionInbound),
			Access: ptr.To(armnetwork.SecurityRuleAccessAllow), Protocol: ptr.To(armnetwork.SecurityRuleProtocolTCP), SourceAddressPrefix: ptr.To("10.1.0.0/16"),
			SourcePortRange: ptr.To("*"), DestinationAddressPrefix: ptr.To("*"), DestinationPortRange: ptr.To("22")}},
	}
	if _, err := h.clients.SecurityGroup.CreateOrUpdate(ctx, devenv.ResourceGroup, devenv.SecurityGroupName, *sg, ""); err != nil {
		t.Fatal(err)
	}
	h.env.Emulator().ResetRequests()
	p2 := newSGProvider(t, h.env.Config, h.clients, record.NewFakeRecorder(100))
	p2.nodes = nodeLister(sgNodes...)
	if _, err := p2.EnsureLoadBalancer(ctx, "kubernetes", web, sgNodes); err != nil {
		t.Fatal(err)
	}
	if n := h.nsgWrites(); n != 0 {
		t.Errorf("takeover: %d NSG writes, want 0", n)
	}
	if r := h.rules(t)["k8s-azure-lb_allow_IPv4_d39272f7f57ed937951650d93992ad77"]; r == nil || *r.Properties.Priority != 502 {
		t.Errorf("adopted rule changed: %+v", r)
	}
}

// Destinations of Services deleted while no controller ran are collected
// at start; live ones stay.
func TestSecurityRulesCollectedAtStart(t *testing.T) {
	h := newSGHarness(t, nil)
	ctx := context.Background()
	web := testService("web", "a1111111-2222-3333-4444-555555555555", nil, 80)
	st, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", web, sgNodes)
	if err != nil {
		t.Fatal(err)
	}
	ip := st.Ingress[0].IP
	sg, err := h.clients.SecurityGroup.Get(ctx, devenv.ResourceGroup, devenv.SecurityGroupName)
	if err != nil {
		t.Fatal(err)
	}
	r := sg.Properties.SecurityRules[0]
	r.Properties.DestinationAddressPrefix = nil
	r.Properties.DestinationAddressPrefixes = []*string{ptr.To(ip), ptr.To("20.99.0.1")} // a Service gone while no controller ran
	if _, err := h.clients.SecurityGroup.CreateOrUpdate(ctx, devenv.ResourceGroup, devenv.SecurityGroupName, *sg, ""); err != nil {
		t.Fatal(err)
	}
	p2 := newSGProvider(t, h.env.Config, h.clients, record.NewFakeRecorder(100))
	p2.nodes = nodeLister(sgNodes...)
	if _, _, err := p2.GetLoadBalancer(ctx, "kubernetes", web); err != nil {
		t.Fatal(err)
	}
	rules := h.rules(t)
	if len(rules) != 1 {
		t.Fatalf("rules = %v", rules)
	}
	for _, r := range rules {
		if strings.Join(ruleDests(r), ",") != ip {
			t.Errorf("destinations = %v, want only %s", ruleDests(r), ip)
		}
	}
}

// A Service whose rules would exceed Azure's limits gets
// SecurityRuleLimitExceeded; the NSG keeps everything else.
func TestSecurityRuleLimitExceeded(t *testing.T) {
	h := newSGHarness(t, nil)
	ctx := context.Background()
	web := testService("web", "b1111111-2222-3333-4444-555555555555", nil, 80)
	if _, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", web, sgNodes); err != nil {
		t.Fatal(err)
	}
	before := h.rules(t)
	big := testService("big", "c1111111-2222-3333-4444-555555555555", nil, 80)
	for i := 0; i < securitygroup.MaxSourcePrefixes+1; i++ {
		big.Spec.LoadBalancerSourceRanges = append(big.Spec.LoadBalancerSourceRanges, fmt.Sprintf("10.%d.%d.%d/32", i/16384, i/64%256, i%64*4))
	}
	_, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", big, sgNodes)
	var le *securitygroup.LimitError
	if !errors.As(err, &le) {
		t.Fatalf("err = %v, want a LimitError", err)
	}
	if ev := h.events(); !hasEvent(ev, "Warning SecurityRuleLimitExceeded") || !strings.Contains(strings.Join(ev, "\n"), "limit of 4000") {
		t.Errorf("events = %v", ev)
	}
	after := h.rules(t)
	if len(after) != len(before) {
		t.Errorf("rules changed: %d before, %d after", len(before), len(after))
	}
}

// A Service that turns internal releases its old public address even when
// its status never showed it (a crash between the NSG write and the status
// update; found by the chaos suite's crash points).
func TestSecurityRulesReleasePreviousFrontend(t *testing.T) {
	h := newSGHarness(t, nil)
	ctx := context.Background()
	svc := testService("web", "d1111111-2222-3333-4444-555555555555", nil, 80)
	st, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", svc, sgNodes)
	if err != nil {
		t.Fatal(err)
	}
	old := st.Ingress[0].IP
	// The status was never written; the Service turns internal.
	svc.Annotations = map[string]string{"service.beta.kubernetes.io/azure-load-balancer-internal": "true"}
	if _, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", svc, sgNodes); err != nil {
		t.Fatal(err)
	}
	for name, r := range h.rules(t) {
		if slices.Contains(ruleDests(r), old) {
			t.Errorf("rule %s still holds the old public address %s", name, old)
		}
	}
}

// A Service whose frontend is gone does not release the address its status
// still shows: another Service may hold it by now (found by the chaos
// suite: a retried delete took a new Service's rules away).
func TestSecurityRulesStaleStatusKeepsOthers(t *testing.T) {
	h := newSGHarness(t, nil)
	ctx := context.Background()
	b := testService("b", "e1111111-2222-3333-4444-555555555555", nil, 80)
	st, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", b, sgNodes)
	if err != nil {
		t.Fatal(err)
	}
	ip := st.Ingress[0].IP
	a := testService("a", "f1111111-2222-3333-4444-555555555555", nil, 80)
	a.Status.LoadBalancer = *st // a stale status: the address was a's before b got it
	if err := h.p.EnsureLoadBalancerDeleted(ctx, "kubernetes", a); err != nil {
		t.Fatal(err)
	}
	held := false
	for _, r := range h.rules(t) {
		held = held || slices.Contains(ruleDests(r), ip)
	}
	if !held {
		t.Errorf("deleting a Service with a stale status took %s out of b's rule", ip)
	}
}

// A move whose NSG write fails (any error) does not forget the address it leaves: the
// release lands before the frontends move and the old public IP is
// deleted, so the retry still knows the address (found by the chaos fault
// mix: rules kept the addresses of public IPs deleted by moves whose NSG
// write was faulted, and another Service got the address later).
func TestSecurityRulesMoveWithFailedNSGWriteReleasesOnRetry(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*v1.Service)
	}{
		{"public to internal", func(s *v1.Service) {
			s.Annotations = map[string]string{"service.beta.kubernetes.io/azure-load-balancer-internal": "true"}
		}},
		{"another public IP", func(s *v1.Service) {
			s.Annotations = map[string]string{"service.beta.kubernetes.io/azure-pip-name": "web-other"}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newSGHarness(t, nil)
			ctx := context.Background()
			svc := testService("web", "d2111111-2222-3333-4444-555555555555", nil, 80)
			st, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", svc, sgNodes)
			if err != nil {
				t.Fatal(err)
			}
			old := st.Ingress[0].IP
			tc.change(svc)
			if _, err := h.env.Emulator().AddFault(emulator.Fault{Method: http.MethodPut, PathRegex: `/networkSecurityGroups/`, Status: http.StatusBadRequest, Code: "InvalidRequestFormat", Count: 1}); err != nil {
				t.Fatal(err)
			}
			if _, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", svc, sgNodes); err == nil {
				t.Fatal("the reconcile whose NSG write failed reported success")
			}
			if _, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", svc, sgNodes); err != nil {
				t.Fatal(err)
			}
			for name, r := range h.rules(t) {
				if slices.Contains(ruleDests(r), old) {
					t.Errorf("rule %s still holds the address %s the Service left", name, old)
				}
			}
		})
	}
}

// A Service deleted after its rule was written but before its frontend
// was (the load balancer write failed): the address of the public IP azlb
// created for it leaves the rules before the public IP is deleted (found by
// the chaos fault mix: such addresses stayed in the NSG for ever).
func TestSecurityRulesDeleteBeforeFrontendReleasesPublicIP(t *testing.T) {
	h := newSGHarness(t, nil)
	ctx := context.Background()
	svc := testService("web", "d3111111-2222-3333-4444-555555555555", nil, 80)
	if _, err := h.env.Emulator().AddFault(emulator.Fault{Method: http.MethodPut, PathRegex: `/loadBalancers/`, Status: http.StatusBadRequest, Code: "InvalidRequestFormat", Count: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", svc, sgNodes); err == nil {
		t.Fatal("the reconcile whose load balancer write failed reported success")
	}
	pip, err := h.clients.PublicIP.Get(ctx, devenv.ResourceGroup, names.PublicIP("kubernetes", svc, v1.IPv4Protocol))
	if err != nil {
		t.Fatal(err)
	}
	addr := pipAddress(pip)
	// The rule's edit was queued before the load balancer write and lands
	// on its own.
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		for _, r := range h.rules(t) {
			if slices.Contains(ruleDests(r), addr) {
				return true, nil
			}
		}
		return false, nil
	}); err != nil {
		t.Fatal("the rule was not written before the load balancer (the test does not exercise the case)")
	}
	if err := h.p.EnsureLoadBalancerDeleted(ctx, "kubernetes", svc); err != nil {
		t.Fatal(err)
	}
	for name, r := range h.rules(t) {
		if slices.Contains(ruleDests(r), addr) {
			t.Errorf("rule %s still holds %s, the address of the deleted Service's public IP", name, addr)
		}
	}
}
