package provider

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"

	"github.com/azlb/azlb/internal/annotations"
	"github.com/azlb/azlb/internal/securitygroup"
)

// Issue 40 item 9: azure-additional-public-ips adds its addresses to the
// Service's security rules, next to its frontend address, per family;
// a dropped entry, or the annotation removed, leaves the rules on the next
// reconcile, and another Service listing the same address keeps it on its
// own ports; the collection keeps what a Service lists and drops what
// nobody lists.
func TestAdditionalPublicIPsInSecurityRules(t *testing.T) {
	h := newRefusalHarness(t)
	ctx := context.Background()
	const global4, global6, other4 = "203.0.113.20", "2001:db8::20", "198.51.100.7"
	web := testService("web", "ad111111-0000-0000-0000-000000000001",
		map[string]string{annotations.KeyAdditionalPublicIPs: " " + global4 + ", " + global6 + ",," + other4}, 80)
	if err := h.ensure(t, web); err != nil {
		t.Fatal(err)
	}
	st, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", web, sgNodes)
	if err != nil {
		t.Fatal(err)
	}
	webIP := st.Ingress[0].IP
	open4 := securitygroup.AllowRuleName(securitygroup.IPv4, "Tcp", []string{"Internet"}, []string{"80"})
	open6 := securitygroup.AllowRuleName(securitygroup.IPv6, "Tcp", []string{"Internet"}, []string{"80"})
	want := func(rule string, dests ...string) {
		t.Helper()
		rules := h.rules(t)
		slices.Sort(dests)
		if r := rules[rule]; r == nil && len(dests) > 0 || r != nil && !slices.Equal(ruleDests(r), dests) {
			var got []string
			if r != nil {
				got = ruleDests(r)
			}
			t.Fatalf("rule %s: destinations %v, want %v (rules %v)", rule, got, dests, ruleNames(rules))
		}
	}
	want(open4, webIP, global4, other4)
	want(open6, global6)

	// Another Service lists global4 too, on its port.
	api := testService("api", "ae111111-0000-0000-0000-000000000002", map[string]string{annotations.KeyAdditionalPublicIPs: global4}, 8080)
	if err := h.ensure(t, api); err != nil {
		t.Fatal(err)
	}
	st, err = h.p.EnsureLoadBalancer(ctx, "kubernetes", api, sgNodes)
	if err != nil {
		t.Fatal(err)
	}
	apiIP := st.Ingress[0].IP
	open8080 := securitygroup.AllowRuleName(securitygroup.IPv4, "Tcp", []string{"Internet"}, []string{"8080"})
	want(open8080, apiIP, global4)

	// web drops global4 and other4: they leave its rule at once, global4
	// stays on api's port.
	web.Annotations[annotations.KeyAdditionalPublicIPs] = global6
	if err := h.ensure(t, web); err != nil {
		t.Fatal(err)
	}
	want(open4, webIP)
	want(open6, global6)
	want(open8080, apiIP, global4)
	if got := rulesWithDest(t, h.sgHarness, global4); strings.Join(got, " ") != "Tcp/8080" {
		t.Fatalf("%s in %v, want only api's Tcp/8080", global4, got)
	}

	// Sources follow the Service's own: restricted, the extra address is
	// in the restricted rule only.
	api.Spec.LoadBalancerSourceRanges = []string{"192.0.2.0/24"}
	if err := h.ensure(t, api); err != nil {
		t.Fatal(err)
	}
	restricted := securitygroup.AllowRuleName(securitygroup.IPv4, "Tcp", []string{"192.0.2.0/24"}, []string{"8080"})
	want(restricted, apiIP, global4)
	want(open8080)

	// A restarted controller (nothing remembered): the start's collection
	// keeps what the Services list, and writes nothing.
	h.env.Emulator().ResetRequests()
	p2 := newSGProvider(t, h.env.Config, h.clients, record.NewFakeRecorder(100))
	p2.nodes = nodeLister(sgNodes...)
	p2.SetServiceLister(h.p.services)
	if err := p2.collectSecurityRules(ctx, false); err != nil {
		t.Fatal(err)
	}
	if n := h.nsgWrites(); n != 0 {
		t.Fatalf("collection with every extra address listed: %d NSG writes", n)
	}
	// web's annotation removed while the new controller has not
	// reconciled it yet: its reconcile does not know global6 was its, the
	// collection takes it out (nobody lists it).
	delete(web.Annotations, annotations.KeyAdditionalPublicIPs)
	if _, err := p2.EnsureLoadBalancer(ctx, "kubernetes", web, sgNodes); err != nil {
		t.Fatal(err)
	}
	if err := p2.collectSecurityRules(ctx, false); err != nil {
		t.Fatal(err)
	}
	want(open6)
	want(open4, webIP)
	want(restricted, apiIP, global4)

	// api is deleted while web lists global4 again: api's rule goes,
	// global4 stays on web's port only, also after web's next write (which
	// gives back the grants of the other Services listing global4, but not
	// of one being deleted, still in the lister until its finalizer goes).
	web.Annotations[annotations.KeyAdditionalPublicIPs] = global4
	if _, err := p2.EnsureLoadBalancer(ctx, "kubernetes", web, sgNodes); err != nil {
		t.Fatal(err)
	}
	api.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	if err := p2.EnsureLoadBalancerDeleted(ctx, "kubernetes", api); err != nil {
		t.Fatal(err)
	}
	if _, err := p2.EnsureLoadBalancer(ctx, "kubernetes", web, sgNodes); err != nil {
		t.Fatal(err)
	}
	if got := rulesWithDest(t, h.sgHarness, global4); strings.Join(got, " ") != "Tcp/80" {
		t.Fatalf("%s in %v after api's delete, want only web's Tcp/80", global4, got)
	}
	want(open4, webIP, global4)
	want(restricted)
}

// An invalid azure-additional-public-ips refuses the Service: one Warning
// naming the annotation and the item, and nothing written, neither for a
// new Service nor for a served one that still lists its addresses (its
// rules stay as they were). A refused change adds no address; one the
// Service no longer lists leaves its rules (narrowed, as a refused change
// never keeps more than the spec names).
func TestAdditionalPublicIPsInvalidIsRefused(t *testing.T) {
	h := newRefusalHarness(t)
	bad := testService("bad", "ad222222-0000-0000-0000-000000000001", map[string]string{annotations.KeyAdditionalPublicIPs: "203.0.113.20, not-an-ip"}, 80)
	h.wantRefused(t, bad, EventReasonInvalidAnnotation, annotations.KeyAdditionalPublicIPs+`: "203.0.113.20, not-an-ip" lists "not-an-ip", which is not an IP address`)
	if rules := h.rules(t); len(rules) != 0 {
		t.Fatalf("rules %v", ruleNames(rules))
	}

	web := testService("web", "ae222222-0000-0000-0000-000000000002", map[string]string{annotations.KeyAdditionalPublicIPs: "203.0.113.20"}, 80)
	if err := h.ensure(t, web); err != nil {
		t.Fatal(err)
	}
	before := h.rules(t)
	web.Annotations[annotations.KeyAdditionalPublicIPs] = "203.0.113.20,2001:db8::/64"
	h.wantRefused(t, web, EventReasonInvalidAnnotation, `lists "2001:db8::/64", which is not an IP address`)
	after := h.rules(t)
	if !slices.Equal(ruleNames(before), ruleNames(after)) {
		t.Fatalf("rules %v, want %v", ruleNames(after), ruleNames(before))
	}
	for name, r := range before {
		if !slices.Equal(ruleDests(r), ruleDests(after[name])) {
			t.Fatalf("rule %s: %v, want %v", name, ruleDests(after[name]), ruleDests(r))
		}
	}
	// The collection keeps what the refused Service still lists.
	if err := h.p.collectSecurityRules(context.Background(), false); err != nil {
		t.Fatal(err)
	}
	if got := rulesWithDest(t, h.sgHarness, "203.0.113.20"); strings.Join(got, " ") != "Tcp/80" {
		t.Fatalf("203.0.113.20 in %v after the collection, want Tcp/80", got)
	}

	web.Annotations[annotations.KeyAdditionalPublicIPs] = "203.0.113.21,2001:db8::/64"
	if err := h.ensure(t, web); !IsRefusal(err) {
		t.Fatalf("err = %v, want a refusal", err)
	}
	for _, a := range []string{"203.0.113.20", "203.0.113.21"} {
		if got := rulesWithDest(t, h.sgHarness, a); len(got) != 0 {
			t.Errorf("%s in %v, want in no rule", a, got)
		}
	}
}

// Floating IP off: the extra addresses join the nodes as destinations, on
// the node ports, as the Azure cloud provider writes them.
func TestAdditionalPublicIPsFloatingIPOff(t *testing.T) {
	h := newRefusalHarness(t)
	svc := testService("web", "ad333333-0000-0000-0000-000000000001", map[string]string{
		annotations.KeyAdditionalPublicIPs: "203.0.113.20", annotations.KeyDisableFloatingIP: "true"}, 80)
	if err := h.ensure(t, svc); err != nil {
		t.Fatal(err)
	}
	got := rulesWithDest(t, h.sgHarness, "203.0.113.20")
	var np []string
	for _, r := range h.rules(t) {
		if slices.Contains(ruleDests(r), "203.0.113.20") {
			np = ruleDests(r)
		}
	}
	if len(got) != 1 || !strings.HasPrefix(got[0], "Tcp/3") || !slices.Contains(np, "10.240.0.4") || !slices.Contains(np, "10.240.0.5") {
		t.Fatalf("rules with the extra address: %v (destinations %v), want the node port rule with the nodes", got, np)
	}
}
