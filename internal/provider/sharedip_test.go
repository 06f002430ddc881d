package provider

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	v1 "k8s.io/api/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/azlb/azlb/internal/devenv"
	"github.com/azlb/azlb/internal/names"
)

// sharedServices is a Service lister the test edits (Services created and
// deleted), as the informer would.
type sharedServices struct{ idx cache.Indexer }

func newSharedServices(h *harness) *sharedServices {
	s := &sharedServices{idx: cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})}
	h.p.SetServiceLister(corelisters.NewServiceLister(s.idx))
	return s
}

func (s *sharedServices) add(svcs ...*v1.Service) {
	for _, x := range svcs {
		_ = s.idx.Add(x)
	}
}

func (s *sharedServices) remove(svc *v1.Service) { _ = s.idx.Delete(svc) }

func sharedSvc(name, uid, pip string, proto v1.Protocol, port int32) *v1.Service {
	svc := testService(name, uid, map[string]string{"service.beta.kubernetes.io/azure-pip-name": pip})
	svc.Spec.Ports = []v1.ServicePort{{Port: port, Protocol: proto, NodePort: 30000 + port}}
	return svc
}

// rulesWithDest lists the allow rules holding dest, as "protocol/ports".
func rulesWithDest(t *testing.T, h *sgHarness, dest string) []string {
	t.Helper()
	var out []string
	for name, r := range h.rules(t) {
		if !strings.Contains(name, "_allow_") || !slices.Contains(ruleDests(r), dest) {
			continue
		}
		ports := ptr.Deref(r.Properties.DestinationPortRange, "")
		for _, p := range r.Properties.DestinationPortRanges {
			ports += *p
		}
		out = append(out, string(ptr.Deref(r.Properties.Protocol, ""))+"/"+ports)
	}
	slices.Sort(out)
	return out
}

func TestSharedPublicIPTwoServicesOneFrontend(t *testing.T) {
	h := newSGHarness(t, nil)
	ctx := context.Background()
	svcs := newSharedServices(h.harness)
	pip := putPublicIP(t, h.harness, devenv.ResourceGroup, "ingress-ip", nil, nil)
	addr := pipAddress(pip)

	web := sharedSvc("web", "a1111111-0000-0000-0000-000000000001", "ingress-ip", v1.ProtocolTCP, 80)
	dns := sharedSvc("dns", "a1111112-0000-0000-0000-000000000002", "ingress-ip", v1.ProtocolUDP, 53)
	svcs.add(web, dns)
	for _, s := range []*v1.Service{web, dns} {
		st, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", s, sgNodes)
		if err != nil {
			t.Fatalf("%s: %v", s.Name, err)
		}
		if len(st.Ingress) != 1 || st.Ingress[0].IP != addr {
			t.Fatalf("%s: status %+v, want the shared address %s", s.Name, st.Ingress, addr)
		}
	}
	lb := h.lb(t, "kubernetes")
	if n := len(lb.Properties.FrontendIPConfigurations); n != 1 {
		t.Fatalf("%d frontends, want one shared frontend", n)
	}
	if got, want := rulesWithDest(t, h, addr), []string{"Tcp/80", "Udp/53"}; !slices.Equal(got, want) {
		t.Fatalf("NSG rules on %s: %v, want %v", addr, got, want)
	}
	for _, s := range []*v1.Service{web, dns} {
		if st, ok, err := h.p.GetLoadBalancer(ctx, "kubernetes", s); err != nil || !ok || len(st.Ingress) != 1 || st.Ingress[0].IP != addr {
			t.Fatalf("GetLoadBalancer(%s) = %+v %v %v", s.Name, st, ok, err)
		}
	}

	// A third Service on the same IP and port: refused, nothing written.
	clash := sharedSvc("clash", "a1111113-0000-0000-0000-000000000003", "ingress-ip", v1.ProtocolTCP, 80)
	clash.Spec.LoadBalancerSourceRanges = []string{"203.0.113.0/24"}
	svcs.add(clash)
	h.events()
	before := h.writes()
	_, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", clash, sgNodes)
	var ce *SharedIPConflictError
	if !errors.As(err, &ce) || ce.Other != "default/web" || ce.Port != 80 {
		t.Fatalf("EnsureLoadBalancer(clash) = %v, want a SharedIPConflictError naming default/web and port 80", err)
	}
	if ev := h.events(); !hasEvent(ev, "Warning SharedIPPortConflict") || !strings.Contains(strings.Join(ev, "\n"), "default/web") {
		t.Fatalf("events %v: want a SharedIPPortConflict naming default/web", ev)
	}
	if w := h.writes(); w != before {
		t.Fatalf("the refused Service cost %d writes, want 0", w-before)
	}
	for _, r := range h.rules(t) {
		for _, src := range r.Properties.SourceAddressPrefixes {
			if *src == "203.0.113.0/24" {
				t.Fatalf("the refused Service's sources reached the NSG: %s", *r.Name)
			}
		}
		if ptr.Deref(r.Properties.SourceAddressPrefix, "") == "203.0.113.0/24" {
			t.Fatalf("the refused Service's sources reached the NSG: %s", *r.Name)
		}
	}

	// dns changes its sources: web keeps its rule on the shared address.
	dns.Spec.LoadBalancerSourceRanges = []string{"198.51.100.0/24"}
	if _, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", dns, sgNodes); err != nil {
		t.Fatal(err)
	}
	if got, want := rulesWithDest(t, h, addr), []string{"Tcp/80", "Udp/53"}; !slices.Equal(got, want) {
		t.Fatalf("after dns changed: NSG rules on %s: %v, want %v", addr, got, want)
	}

	// web, whose frontend it is, goes: the frontend stays for dns, and so
	// do dns's rules.
	svcs.remove(web)
	if err := h.p.EnsureLoadBalancerDeleted(ctx, "kubernetes", web); err != nil {
		t.Fatal(err)
	}
	lb = h.lb(t, "kubernetes")
	if lb == nil || len(lb.Properties.FrontendIPConfigurations) != 1 || len(lb.Properties.LoadBalancingRules) != 1 {
		t.Fatalf("after web left: %+v, want the frontend kept for dns with dns's rule", lb)
	}
	if got, want := rulesWithDest(t, h, addr), []string{"Udp/53"}; !slices.Equal(got, want) {
		t.Fatalf("after web left: NSG rules on %s: %v, want %v", addr, got, want)
	}
	if st, ok, err := h.p.GetLoadBalancer(ctx, "kubernetes", dns); err != nil || !ok || len(st.Ingress) != 1 || st.Ingress[0].IP != addr {
		t.Fatalf("GetLoadBalancer(dns) after web left = %+v %v %v", st, ok, err)
	}
	// dns reconciles again: nothing changes.
	before = h.writes()
	if _, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", dns, sgNodes); err != nil {
		t.Fatal(err)
	}
	if w := h.writes(); w != before {
		t.Fatalf("a repeated reconcile of dns cost %d writes", w-before)
	}

	// The last user goes: the frontend and the load balancer go; the
	// user's public IP stays.
	svcs.remove(dns)
	if err := h.p.EnsureLoadBalancerDeleted(ctx, "kubernetes", dns); err != nil {
		t.Fatal(err)
	}
	if lb := h.lb(t, "kubernetes"); lb != nil && len(lb.Properties.FrontendIPConfigurations) != 0 {
		t.Fatalf("frontends left after the last Service went: %d", len(lb.Properties.FrontendIPConfigurations))
	}
	if got := rulesWithDest(t, h, addr); len(got) != 0 {
		t.Fatalf("NSG rules left on %s: %v", addr, got)
	}
	h.pip(t, devenv.ResourceGroup, "ingress-ip")
}

// A Service names the public IP azlb created for another one: the IP
// stays while either uses it, and goes with the last.
func TestSharedOwnedPublicIPGoesWithItsLastUser(t *testing.T) {
	h := newSGHarness(t, nil)
	ctx := context.Background()
	svcs := newSharedServices(h.harness)
	first := testService("first", "b2222221-0000-0000-0000-000000000001", nil, 80)
	svcs.add(first)
	st, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", first, sgNodes)
	if err != nil {
		t.Fatal(err)
	}
	pipName := names.PublicIP(h.p.clusterName(), first, v1.IPv4Protocol)
	second := sharedSvc("second", "b2222222-0000-0000-0000-000000000002", pipName, v1.ProtocolTCP, 443)
	svcs.add(second)
	st2, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", second, sgNodes)
	if err != nil {
		t.Fatal(err)
	}
	if st2.Ingress[0].IP != st.Ingress[0].IP {
		t.Fatalf("second got %s, want the shared %s", st2.Ingress[0].IP, st.Ingress[0].IP)
	}
	svcs.remove(first)
	if err := h.p.EnsureLoadBalancerDeleted(ctx, "kubernetes", first); err != nil {
		t.Fatal(err)
	}
	h.pip(t, devenv.ResourceGroup, pipName) // still there: second uses it
	svcs.remove(second)
	if err := h.p.EnsureLoadBalancerDeleted(ctx, "kubernetes", second); err != nil {
		t.Fatal(err)
	}
	if _, err := h.clients.PublicIP.Get(ctx, devenv.ResourceGroup, pipName); err == nil {
		t.Fatalf("public IP %s left after both Services went", pipName)
	}
	if lb := h.lb(t, "kubernetes"); lb != nil && len(lb.Properties.FrontendIPConfigurations) != 0 {
		t.Fatalf("frontends left: %d", len(lb.Properties.FrontendIPConfigurations))
	}
}

func TestSharedInternalIP(t *testing.T) {
	h := newSGHarness(t, nil)
	ctx := context.Background()
	newSharedServices(h.harness).add()
	mk := func(name, uid string, proto v1.Protocol, port int32) *v1.Service {
		s := testService(name, uid, map[string]string{"service.beta.kubernetes.io/azure-load-balancer-internal": "true"})
		s.Spec.LoadBalancerIP = "10.240.0.200"
		s.Spec.Ports = []v1.ServicePort{{Port: port, Protocol: proto, NodePort: 30000 + port}}
		return s
	}
	a := mk("a", "c3333331-0000-0000-0000-000000000001", v1.ProtocolTCP, 80)
	b := mk("b", "c3333332-0000-0000-0000-000000000002", v1.ProtocolTCP, 8080)
	for _, s := range []*v1.Service{a, b} {
		st, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", s, sgNodes)
		if err != nil {
			t.Fatalf("%s: %v", s.Name, err)
		}
		if st.Ingress[0].IP != "10.240.0.200" {
			t.Fatalf("%s: %+v", s.Name, st.Ingress)
		}
	}
	if n := len(h.lb(t, "kubernetes-internal").Properties.FrontendIPConfigurations); n != 1 {
		t.Fatalf("%d internal frontends, want 1", n)
	}
}

func TestSharedIPPlacementFollowsTheIP(t *testing.T) {
	h := newHarness(t, multiSLBConfig)
	ctx := context.Background()
	newSharedServices(h).add()
	nodes := []*v1.Node{testNode("n1", "10.240.0.4")}
	putPublicIP(t, h, devenv.ResourceGroup, "shared", nil, nil)
	a := sharedSvc("a", "d4444441-0000-0000-0000-000000000001", "shared", v1.ProtocolTCP, 80)
	a.Annotations["service.beta.kubernetes.io/azure-load-balancer-configurations"] = "lb-2"
	a.Labels = map[string]string{"tier": "two"}
	if _, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", a, nodes); err != nil {
		t.Fatal(err)
	}
	b := sharedSvc("b", "d4444442-0000-0000-0000-000000000002", "shared", v1.ProtocolTCP, 443)
	if _, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", b, nodes); err != nil {
		t.Fatal(err)
	}
	if lb := h.lb(t, "lb-2"); lb == nil || !servesService(lb, names.FrontendBase(b)) {
		t.Fatal("b is not on lb-2 with the IP it shares")
	}
	c := sharedSvc("c", "d4444443-0000-0000-0000-000000000003", "shared", v1.ProtocolTCP, 8443)
	c.Annotations["service.beta.kubernetes.io/azure-load-balancer-configurations"] = "kubernetes"
	_, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", c, nodes)
	if err == nil || !strings.Contains(err.Error(), "lb-2") {
		t.Fatalf("c asks for another load balancer than its shared IP's: %v", err)
	}
	found := false
	for len(h.recorder.Events) > 0 {
		if e := <-h.recorder.Events; strings.HasPrefix(e, "Warning SharedIPPlacementConflict") {
			found = true
		}
	}
	if !found {
		t.Fatal("no SharedIPPlacementConflict event")
	}
	if lb := h.lb(t, "kubernetes"); lb != nil && servesService(lb, names.FrontendBase(c)) {
		t.Fatal("c was written to kubernetes")
	}
	// a, whose frontend b uses, asks to move: refused, b keeps its IP.
	a.Annotations["service.beta.kubernetes.io/azure-load-balancer-configurations"] = "kubernetes"
	if _, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", a, nodes); err == nil {
		t.Fatal("a moved away from the frontend b shares")
	}
	if lb := h.lb(t, "lb-2"); lb == nil || !servesService(lb, names.FrontendBase(a)) || !servesService(lb, names.FrontendBase(b)) {
		t.Fatal("a or b left lb-2")
	}
}

// Two Services sharing an IP reconciled at once (a DNS pair created
// together): each keeps its rule. Each NSG edit releases the address
// from every rule and gives the other Services on it their rules back, so
// the reconciles must see each other's load balancer writes.
func TestSharedIPConcurrentReconcilesKeepBothRules(t *testing.T) {
	for i := range 3 {
		h := newSGHarness(t, nil)
		ctx := context.Background()
		svcs := newSharedServices(h.harness)
		pipName := fmt.Sprintf("dns-ip-%d", i)
		tcp := sharedSvc("dns-tcp", "e5555551-0000-0000-0000-000000000001", pipName, v1.ProtocolTCP, 53)
		udp := sharedSvc("dns-udp", "e5555552-0000-0000-0000-000000000002", pipName, v1.ProtocolUDP, 53)
		svcs.add(tcp, udp)
		var wg sync.WaitGroup
		addrs := make([]string, 2)
		for j, s := range []*v1.Service{tcp, udp} {
			wg.Go(func() {
				st, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", s, sgNodes)
				if err != nil {
					t.Errorf("%s: %v", s.Name, err)
					return
				}
				addrs[j] = st.Ingress[0].IP
			})
		}
		wg.Wait()
		if t.Failed() {
			return
		}
		if addrs[0] != addrs[1] {
			t.Fatalf("addresses %v: want one shared", addrs)
		}
		if got, want := rulesWithDest(t, h, addrs[0]), []string{"Tcp/53", "Udp/53"}; !slices.Equal(got, want) {
			t.Fatalf("run %d: NSG rules on %s: %v, want %v", i, addrs[0], got, want)
		}
	}
}
