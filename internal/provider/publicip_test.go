package provider

import (
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"

	"github.com/azlb/azlb/internal/annotations"
	"github.com/azlb/azlb/internal/azure"
	"github.com/azlb/azlb/internal/config"
	"github.com/azlb/azlb/internal/devenv"
	"github.com/azlb/azlb/internal/emulator"
	"github.com/azlb/azlb/internal/lbstore"
	"github.com/azlb/azlb/internal/names"
	"github.com/azlb/azlb/internal/testutil"
)

// putGroup creates a resource group in the emulator.
func putGroup(t *testing.T, h *harness, name string) {
	t.Helper()
	c, err := arm.NewClient("azlbtest", "v1.0.0", h.clients.Credential(), h.clients.ARMClientOptions("test"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	req, err := runtime.NewRequest(ctx, http.MethodPut, runtime.JoinPaths(c.Endpoint(), "/subscriptions/"+h.env.Config.SubscriptionID+"/resourcegroups/"+name))
	if err != nil {
		t.Fatal(err)
	}
	req.Raw().URL.RawQuery = "api-version=2021-04-01"
	if err := runtime.MarshalAsJSON(req, map[string]string{"location": devenv.Location}); err != nil {
		t.Fatal(err)
	}
	resp, err := c.Pipeline().Do(req)
	if err != nil || resp.StatusCode/100 != 2 {
		t.Fatalf("put resource group %s: %v %v", name, resp, err)
	}
}

// putPublicIP creates a Standard public IP, as a user would.
func putPublicIP(t *testing.T, h *harness, rg, name string, tags map[string]*string, zones []*string) *armnetwork.PublicIPAddress {
	t.Helper()
	pip, err := h.clients.PublicIP.CreateOrUpdate(context.Background(), rg, name, armnetwork.PublicIPAddress{
		Location: to.Ptr(h.env.Config.Location), Tags: tags, Zones: zones,
		SKU:        &armnetwork.PublicIPAddressSKU{Name: to.Ptr(armnetwork.PublicIPAddressSKUNameStandard)},
		Properties: &armnetwork.PublicIPAddressPropertiesFormat{PublicIPAllocationMethod: to.Ptr(armnetwork.IPAllocationMethodStatic)},
	}, "")
	if err != nil {
		t.Fatal(err)
	}
	return pip
}

// putPrefix creates a public IPv4 prefix of the given length.
func putPrefix(t *testing.T, h *harness, name string, bits int32) *armnetwork.PublicIPPrefix {
	t.Helper()
	c, err := armnetwork.NewPublicIPPrefixesClient(h.env.Config.SubscriptionID, h.clients.Credential(), h.clients.ARMClientOptions("test"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	poller, err := c.BeginCreateOrUpdate(ctx, devenv.ResourceGroup, name, armnetwork.PublicIPPrefix{
		Location: to.Ptr(h.env.Config.Location),
		SKU:      &armnetwork.PublicIPPrefixSKU{Name: to.Ptr(armnetwork.PublicIPPrefixSKUNameStandard)},
		Properties: &armnetwork.PublicIPPrefixPropertiesFormat{PrefixLength: to.Ptr(bits),
			PublicIPAddressVersion: to.Ptr(armnetwork.IPVersionIPv4)},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := poller.PollUntilDone(ctx, &runtime.PollUntilDoneOptions{Frequency: time.Second}); err != nil {
		t.Fatal(err)
	}
	got, err := c.Get(ctx, devenv.ResourceGroup, name, nil)
	if err != nil {
		t.Fatal(err)
	}
	return &got.PublicIPPrefix
}

func (h *harness) pip(t *testing.T, rg, name string) *armnetwork.PublicIPAddress {
	t.Helper()
	pip, err := h.clients.PublicIP.Get(context.Background(), rg, name)
	if err != nil {
		t.Fatalf("get public IP %s/%s: %v", rg, name, err)
	}
	return pip
}

// drain returns the events recorded so far.
func drain(rec *record.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-rec.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func tagMap(tags map[string]*string) map[string]string {
	out := map[string]string{}
	for k, v := range tags {
		out[k] = ptr.Deref(v, "")
	}
	return out
}

// Public IPs in another resource group (azure-load-balancer-resource-group)
// are found by address and by name; one azlb creates there is its own and
// goes with the Service; one it does not own is never deleted or retagged;
// the NSG collection reads their addresses (issue 26).
func TestPublicIPInAnotherResourceGroup(t *testing.T) {
	sh := newSGHarness(t, nil)
	h := sh.harness
	h.p.nodes = nodeLister(sgNodes...)
	ctx := context.Background()
	putGroup(t, h, "net-rg")
	userTags := map[string]*string{"owner": to.Ptr("netops")}
	user := putPublicIP(t, h, "net-rg", "static-ip", userTags, nil)
	addr := pipAddress(user)

	byAddr := testService("byaddr", "e1000001-0000-0000-0000-000000000000", map[string]string{annotations.KeyPIPResourceGroup: "net-rg"}, 80)
	byAddr.Spec.LoadBalancerIP = addr
	st, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", byAddr, sgNodes)
	if err != nil {
		t.Fatalf("by address: %v", err)
	}
	if st.Ingress[0].IP != addr {
		t.Fatalf("ingress %v, want %s", st.Ingress, addr)
	}
	byName := testService("byname", "e1000002-0000-0000-0000-000000000000", map[string]string{
		annotations.KeyPIPResourceGroup: "net-rg", annotations.KeyPIPName: "byname-ip"}, 80)
	if _, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", byName, sgNodes); err != nil {
		t.Fatalf("by name: %v", err)
	}
	created := h.pip(t, "net-rg", "byname-ip")
	if tagValue(created.Tags, names.TagServiceName) != "default/byname" {
		t.Fatalf("public IP created in net-rg is not azlb's: tags %v", tagMap(created.Tags))
	}
	fe := findFrontend(h.lb(t, "kubernetes"), names.Frontend(byAddr, v1.IPv4Protocol))
	if !strings.EqualFold(ptr.Deref(fe.Properties.PublicIPAddress.ID, ""), ptr.Deref(user.ID, "")) {
		t.Fatalf("frontend uses %s, want %s", ptr.Deref(fe.Properties.PublicIPAddress.ID, ""), ptr.Deref(user.ID, ""))
	}

	// A restarted controller collects the NSG with both frontends' public
	// IPs in net-rg: their addresses stay.
	p2 := newSGProvider(t, h.env.Config, h.clients, record.NewFakeRecorder(100))
	p2.nodes = nodeLister(sgNodes...)
	if _, _, err := p2.GetLoadBalancer(ctx, "kubernetes", byAddr); err != nil {
		t.Fatalf("collection at start: %v", err)
	}
	var dests []string
	for _, r := range sh.rules(t) {
		dests = append(dests, ruleDests(r)...)
	}
	if d := strings.Join(dests, ","); !strings.Contains(d, addr) || !strings.Contains(d, pipAddress(created)) {
		t.Fatalf("NSG destinations %v lost an address of net-rg (%s, %s)", dests, addr, pipAddress(created))
	}

	if err := p2.EnsureLoadBalancerDeleted(ctx, "kubernetes", byAddr); err != nil {
		t.Fatal(err)
	}
	if got := h.pip(t, "net-rg", "static-ip"); !maps.Equal(tagMap(got.Tags), tagMap(userTags)) {
		t.Fatalf("the user's public IP was retagged: %v", tagMap(got.Tags))
	}
	if err := p2.EnsureLoadBalancerDeleted(ctx, "kubernetes", byName); err != nil {
		t.Fatal(err)
	}
	if _, err := h.clients.PublicIP.Get(ctx, "net-rg", "byname-ip"); err == nil {
		t.Fatal("azlb's public IP in net-rg was not deleted with its Service")
	}
}

// azure-pip-prefix-id allocates a created public IP from the prefix;
// azure-pip-tags and azure-pip-ip-tags tag it; a tag change is one write
// of the tags; what Azure cannot change is an event; a missing or full
// prefix is an event naming it (issue 26).
func TestPublicIPPrefixAndTags(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()
	nodes := []*v1.Node{testNode("n1", "10.240.0.4")}
	prefix := putPrefix(t, h, "web-prefix", 31)
	block := netip.MustParsePrefix(ptr.Deref(prefix.Properties.IPPrefix, ""))
	ann := map[string]string{
		annotations.KeyPIPPrefixID: ptr.Deref(prefix.ID, ""),
		annotations.KeyPIPTags:     "team=web",
		annotations.KeyPIPIPTags:   "RoutingPreference=Internet",
	}
	svc := testService("web", "e2000001-0000-0000-0000-000000000000", ann, 80)
	st, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", svc, nodes)
	if err != nil {
		t.Fatal(err)
	}
	if !block.Contains(netip.MustParseAddr(st.Ingress[0].IP)) {
		t.Fatalf("address %s is not from prefix %s", st.Ingress[0].IP, block)
	}
	pipName := names.PublicIP("kubernetes", svc, v1.IPv4Protocol)
	pip := h.pip(t, devenv.ResourceGroup, pipName)
	if !strings.EqualFold(pipPrefixID(pip), ptr.Deref(prefix.ID, "")) || tagMap(pip.Tags)["team"] != "web" ||
		len(pip.Properties.IPTags) != 1 || ptr.Deref(pip.Properties.IPTags[0].Tag, "") != "Internet" {
		t.Fatalf("public IP prefix %q, tags %v, IP tags %s", pipPrefixID(pip), tagMap(pip.Tags), ipTagsString(pip))
	}

	// A tag change: one write, of the public IP, that keeps the rest.
	svc.Annotations[annotations.KeyPIPTags] = "team=db"
	h.env.Emulator().ResetRequests()
	drain(h.recorder)
	if _, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", svc, nodes); err != nil {
		t.Fatal(err)
	}
	if w := h.writes(); w != 1 {
		t.Errorf("tag change made %d writes, want 1", w)
	}
	after := h.pip(t, devenv.ResourceGroup, pipName)
	if tagMap(after.Tags)["team"] != "db" || pipAddress(after) != pipAddress(pip) || ipTagsString(after) != ipTagsString(pip) {
		t.Errorf("after the tag change: tags %v, address %s, IP tags %s", tagMap(after.Tags), pipAddress(after), ipTagsString(after))
	}

	// IP tags are set at creation only: a change replaces the public IP
	// (TestIPTagsChangeReplacesOwnedPublicIP), from the same prefix.
	svc.Annotations[annotations.KeyPIPIPTags] = "RoutingPreference=Microsoft"
	st, err = h.p.EnsureLoadBalancer(ctx, "kubernetes", svc, nodes)
	if err != nil {
		t.Fatal(err)
	}
	if !block.Contains(netip.MustParseAddr(st.Ingress[0].IP)) {
		t.Fatalf("address %s is not from prefix %s", st.Ingress[0].IP, block)
	}
	if ev := strings.Join(drain(h.recorder), "\n"); !strings.Contains(ev, EventReasonPublicIPReplaced) || !strings.Contains(ev, annotations.KeyPIPIPTags) {
		t.Errorf("events %q, want %s naming %s", ev, EventReasonPublicIPReplaced, annotations.KeyPIPIPTags)
	}

	// The /31 has one address left, then none.
	second := testService("second", "e2000002-0000-0000-0000-000000000000", map[string]string{annotations.KeyPIPPrefixID: ptr.Deref(prefix.ID, "")}, 80)
	if _, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", second, nodes); err != nil {
		t.Fatal(err)
	}
	third := testService("third", "e2000003-0000-0000-0000-000000000000", map[string]string{annotations.KeyPIPPrefixID: ptr.Deref(prefix.ID, "")}, 80)
	if _, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", third, nodes); err == nil {
		t.Fatal("a third address from a /31 prefix")
	}
	ev := strings.Join(drain(h.recorder), "\n")
	if !strings.Contains(ev, EventReasonPublicIPPrefixUnusable) || !strings.Contains(ev, ptr.Deref(prefix.ID, "")) || strings.Contains(ev, EventReasonPublicIPNotFound) {
		t.Errorf("events %q, want one %s naming the prefix", ev, EventReasonPublicIPPrefixUnusable)
	}

	missing := strings.Replace(ptr.Deref(prefix.ID, ""), "web-prefix", "no-such-prefix", 1)
	bad := testService("bad", "e2000004-0000-0000-0000-000000000000", map[string]string{annotations.KeyPIPPrefixID: missing}, 80)
	if _, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", bad, nodes); err == nil {
		t.Fatal("a public IP from a missing prefix")
	}
	ev = strings.Join(drain(h.recorder), "\n")
	if !strings.Contains(ev, EventReasonPublicIPPrefixUnusable) || !strings.Contains(ev, missing) || !strings.Contains(ev, "does not exist") {
		t.Errorf("events %q, want %s naming %s", ev, EventReasonPublicIPPrefixUnusable, missing)
	}
}

// New Standard public IPs and internal frontends are zone-redundant where
// the region has zones; existing ones keep theirs (none) and are never
// recreated for it; a region without zones gets none (issue 26).
func TestZones(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()
	nodes := []*v1.Node{testNode("n1", "10.240.0.4")}
	zoneRedundant := []string{"1", "2", "3"}

	web := testService("web", "e3000001-0000-0000-0000-000000000000", nil, 80)
	if _, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", web, nodes); err != nil {
		t.Fatal(err)
	}
	if z := derefAll(h.pip(t, devenv.ResourceGroup, names.PublicIP("kubernetes", web, v1.IPv4Protocol)).Zones); strings.Join(z, ",") != strings.Join(zoneRedundant, ",") {
		t.Errorf("new public IP zones %v, want %v", z, zoneRedundant)
	}
	internal := testService("int", "e3000002-0000-0000-0000-000000000000", map[string]string{annotations.KeyInternal: "true"}, 80)
	if _, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", internal, nodes); err != nil {
		t.Fatal(err)
	}
	fe := findFrontend(h.lb(t, "kubernetes-internal"), names.Frontend(internal, v1.IPv4Protocol))
	if z := derefAll(fe.Zones); strings.Join(z, ",") != strings.Join(zoneRedundant, ",") {
		t.Errorf("new internal frontend zones %v, want %v", z, zoneRedundant)
	}

	// An owned public IP from before, without zones, is kept as it is.
	old := testService("old", "e3000003-0000-0000-0000-000000000000", nil, 80)
	oldName := names.PublicIP("kubernetes", old, v1.IPv4Protocol)
	before := putPublicIP(t, h, devenv.ResourceGroup, oldName, map[string]*string{
		names.TagServiceName: to.Ptr("default/old"), names.TagClusterName: to.Ptr("kubernetes")}, nil)
	st, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", old, nodes)
	if err != nil {
		t.Fatal(err)
	}
	if after := h.pip(t, devenv.ResourceGroup, oldName); st.Ingress[0].IP != pipAddress(before) || len(after.Zones) != 0 {
		t.Errorf("existing public IP: ingress %v (had %s), zones %v", st.Ingress, pipAddress(before), derefAll(after.Zones))
	}

	// An internal frontend from before, without zones, keeps none, also
	// when it is rewritten (another static address).
	legacy := testService("legacy", "e3000004-0000-0000-0000-000000000000", map[string]string{annotations.KeyInternal: "true", annotations.KeyIPv4: "10.240.0.50"}, 80)
	lb := h.lb(t, "kubernetes-internal")
	lb.Properties.FrontendIPConfigurations = append(lb.Properties.FrontendIPConfigurations, &armnetwork.FrontendIPConfiguration{
		Name: to.Ptr(names.Frontend(legacy, v1.IPv4Protocol)),
		Properties: &armnetwork.FrontendIPConfigurationPropertiesFormat{
			Subnet:                    &armnetwork.Subnet{ID: to.Ptr(h.p.subnetID(h.env.Config.SubnetName))},
			PrivateIPAllocationMethod: to.Ptr(armnetwork.IPAllocationMethodStatic), PrivateIPAddress: to.Ptr("10.240.0.50"),
		},
	})
	if _, err := h.clients.LoadBalancer.CreateOrUpdate(ctx, devenv.ResourceGroup, "kubernetes-internal", *lb, ""); err != nil {
		t.Fatal(err)
	}
	p2 := h.restartWith(t, func(*config.Config) {})
	for _, ip := range []string{"10.240.0.50", "10.240.0.51"} {
		legacy.Annotations[annotations.KeyIPv4] = ip
		if _, err := p2.EnsureLoadBalancer(ctx, "kubernetes", legacy, nodes); err != nil {
			t.Fatalf("legacy frontend at %s: %v", ip, err)
		}
		fe := findFrontend(h.lb(t, "kubernetes-internal"), names.Frontend(legacy, v1.IPv4Protocol))
		if len(fe.Zones) != 0 || ptr.Deref(fe.Properties.PrivateIPAddress, "") != ip {
			t.Errorf("legacy frontend: zones %v, address %s; want none, %s", derefAll(fe.Zones), ptr.Deref(fe.Properties.PrivateIPAddress, ""), ip)
		}
	}

	// A region without zones: none.
	westus := h.restartWith(t, func(c *config.Config) { c.Location = "westus"; c.LoadBalancerName = "west" })
	west := testService("west", "e3000005-0000-0000-0000-000000000000", nil, 80)
	if _, err := westus.EnsureLoadBalancer(ctx, "kubernetes", west, nil); err != nil {
		t.Fatalf("westus: %v", err)
	}
	if pip, err := h.clients.PublicIP.Get(ctx, devenv.ResourceGroup, names.PublicIP("kubernetes", west, v1.IPv4Protocol)); err != nil || len(pip.Zones) != 0 {
		t.Errorf("westus public IP: %v, zones %v; want one without zones", err, pip)
	}
}

// azure.json tags are put on the load balancer, the public IP and the NSG;
// a change of tags is applied with writes of the tags only; systemTags
// keys stay (issue 26).
func TestConfigTags(t *testing.T) {
	sh := newSGHarness(t, func(c *config.Config) { c.Tags = "team=web,env=prod"; c.SystemTags = "keep-me" })
	h := sh.harness
	h.p = newTaggedSGProvider(t, h.env.Config, h.clients, h.recorder)
	h.p.nodes = nodeLister(sgNodes...)
	ctx := context.Background()
	nsg, err := h.clients.SecurityGroup.Get(ctx, devenv.ResourceGroup, devenv.SecurityGroupName)
	if err != nil {
		t.Fatal(err)
	}
	nsg.Tags = map[string]*string{"keep-me": to.Ptr("x"), "stale": to.Ptr("y")}
	if _, err := h.clients.SecurityGroup.CreateOrUpdate(ctx, devenv.ResourceGroup, devenv.SecurityGroupName, *nsg, ""); err != nil {
		t.Fatal(err)
	}
	svc := testService("web", "e4000001-0000-0000-0000-000000000000", nil, 80)
	if _, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", svc, sgNodes); err != nil {
		t.Fatal(err)
	}
	pipName := names.PublicIP("kubernetes", svc, v1.IPv4Protocol)
	check := func(what string, got map[string]*string, want map[string]string) {
		t.Helper()
		if g := tagMap(got); !maps.Equal(g, want) {
			t.Errorf("%s tags %v, want %v", what, g, want)
		}
	}
	check("load balancer", h.lb(t, "kubernetes").Tags, map[string]string{"team": "web", "env": "prod", names.TagClusterName: "kubernetes"})
	check("public IP", h.pip(t, devenv.ResourceGroup, pipName).Tags, map[string]string{"team": "web", "env": "prod",
		names.TagClusterName: "kubernetes", names.TagServiceName: "default/web"})
	nsg, _ = h.clients.SecurityGroup.Get(ctx, devenv.ResourceGroup, devenv.SecurityGroupName)
	check("NSG", nsg.Tags, map[string]string{"team": "web", "env": "prod", "keep-me": "x"})

	// The tags change: each object is written once, with only its tags
	// changed.
	lbBefore := h.lb(t, "kubernetes")
	p2 := newTaggedSGProvider(t, withTags(t, h.env.Config, "team=db"), h.clients, h.recorder)
	p2.nodes = nodeLister(sgNodes...)
	h.env.Emulator().ResetRequests()
	if _, err := p2.EnsureLoadBalancer(ctx, "kubernetes", svc, sgNodes); err != nil {
		t.Fatal(err)
	}
	lbAfter := h.lb(t, "kubernetes")
	check("load balancer", lbAfter.Tags, map[string]string{"team": "db", names.TagClusterName: "kubernetes"})
	check("public IP", h.pip(t, devenv.ResourceGroup, pipName).Tags, map[string]string{"team": "db",
		names.TagClusterName: "kubernetes", names.TagServiceName: "default/web"})
	nsg, _ = h.clients.SecurityGroup.Get(ctx, devenv.ResourceGroup, devenv.SecurityGroupName)
	check("NSG", nsg.Tags, map[string]string{"team": "db", "keep-me": "x"})
	if got, want := propsJSON(t, lbAfter.Properties), propsJSON(t, lbBefore.Properties); got != want {
		t.Errorf("the tag change changed the load balancer:\n%s\nwas\n%s", got, want)
	}
	if w := h.writes(); w != 3 {
		t.Errorf("tag change made %d writes, want 3 (load balancer, public IP, NSG)", w)
	}
}

// newTaggedSGProvider is newSGProvider with the NSG writer NewCloud
// builds: one that applies azure.json tags.
func newTaggedSGProvider(t *testing.T, cfg *config.Config, clients *azure.Clients, rec record.EventRecorder) *Provider {
	t.Helper()
	store := testutil.StartStore(t, lbstore.Options{Config: cfg, LoadBalancers: clients.LoadBalancer, Pools: clients.BackendPool})
	sg, err := newSecurityGroups(cfg, clients)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); sg.Run(runCtx) }()
	t.Cleanup(func() { cancel(); <-done })
	p, err := New(Options{Config: cfg, Clients: clients, Store: store, Recorder: rec, SecurityGroups: sg})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func withTags(t *testing.T, cfg *config.Config, tags string) *config.Config {
	t.Helper()
	c := *cfg
	c.Tags = tags
	return &c
}

// propsJSON is a load balancer's properties without etags.
func propsJSON(t *testing.T, p *armnetwork.LoadBalancerPropertiesFormat) string {
	t.Helper()
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var m any
	_ = json.Unmarshal(b, &m)
	stripEtags(m)
	b, _ = json.Marshal(m)
	return string(b)
}

func stripEtags(v any) {
	switch x := v.(type) {
	case map[string]any:
		delete(x, "etag")
		for _, e := range x {
			stripEtags(e)
		}
	case []any:
		for _, e := range x {
			stripEtags(e)
		}
	}
}

// azure-pip-tags as the Azure cloud provider's suite writes it: the items
// with a key are applied (trimmed, an empty value kept), the one without
// is dropped with a Warning event naming it, once per generation; a later
// change is applied the same way (issue 40 item 3).
func TestPIPTagsDropWhatUpstreamDrops(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()
	nodes := []*v1.Node{testNode("n1", "10.240.0.4")}
	svc := testService("web", "e2000011-0000-0000-0000-000000000000", map[string]string{annotations.KeyPIPTags: "a=b,c= d,e =, =f"}, 80)
	if _, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", svc, nodes); err != nil {
		t.Fatal(err)
	}
	pipName := names.PublicIP("kubernetes", svc, v1.IPv4Protocol)
	got := tagMap(h.pip(t, devenv.ResourceGroup, pipName).Tags)
	for k, v := range map[string]string{"a": "b", "c": "d", "e": ""} {
		if w, ok := got[k]; !ok || w != v {
			t.Errorf("tag %s = %q (present %v), want %q; tags %v", k, w, ok, v, got)
		}
	}
	ev := strings.Join(drain(h.recorder), "\n")
	if strings.Count(ev, EventReasonPublicIPTagsDropped) != 1 || !strings.Contains(ev, `"=f" is not a key=value pair`) {
		t.Errorf("events %q, want one %s naming \"=f\"", ev, EventReasonPublicIPTagsDropped)
	}
	if _, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", svc, nodes); err != nil {
		t.Fatal(err)
	}
	if ev := strings.Join(drain(h.recorder), "\n"); strings.Contains(ev, EventReasonPublicIPTagsDropped) {
		t.Errorf("the same generation told again: %q", ev)
	}

	svc = svc.DeepCopy()
	svc.Generation++
	svc.Annotations[annotations.KeyPIPTags] = " a = x ,team"
	if _, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", svc, nodes); err != nil {
		t.Fatal(err)
	}
	if got := tagMap(h.pip(t, devenv.ResourceGroup, pipName).Tags); got["a"] != "x" {
		t.Errorf("after the change: tags %v, want a=x", got)
	}
	if ev := strings.Join(drain(h.recorder), "\n"); !strings.Contains(ev, `"team" is not a key=value pair`) {
		t.Errorf("events %q, want %s naming \"team\"", ev, EventReasonPublicIPTagsDropped)
	}
}

// A public Service asking for a private address is told the address is not
// a public one, without a look-up (issue 40 item 7).
func TestPrivateAddressOnPublicService(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()
	nodes := []*v1.Node{testNode("n1", "10.240.0.4")}
	byAnnotation := testService("web", "e2000021-0000-0000-0000-000000000000", map[string]string{annotations.KeyIPv4: "10.0.0.5"}, 80)
	byField := testService("api", "e2000022-0000-0000-0000-000000000000", nil, 80)
	byField.Spec.LoadBalancerIP = "172.16.0.9"
	for field, svc := range map[string]*v1.Service{annotations.KeyIPv4 + "=10.0.0.5": byAnnotation, "spec.loadBalancerIP=172.16.0.9": byField} {
		h.env.Emulator().ResetRequests()
		if _, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", svc, nodes); err == nil {
			t.Fatalf("%s: served", field)
		}
		ev := strings.Join(drain(h.recorder), "\n")
		if !strings.Contains(ev, EventReasonPublicIPNotFound) || !strings.Contains(ev, field+" is not a public address") || !strings.Contains(ev, annotations.KeyInternal) {
			t.Errorf("%s: events %q, want %s saying the address is not public", field, ev, EventReasonPublicIPNotFound)
		}
		if w := h.writes(); w != 0 {
			t.Errorf("%s: %d writes, want 0", field, w)
		}
	}
}

// azure-dns-label-name on a user-assigned public IP (named by address) sets
// its DNS label, before and after the label changes, and writes nothing
// else of it; an owned public IP follows a label change too (issue 40
// item 1).
func TestDNSLabelOnUserPublicIP(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()
	nodes := []*v1.Node{testNode("n1", "10.240.0.4")}
	user := putPublicIP(t, h, devenv.ResourceGroup, "my-ip", map[string]*string{"owner": to.Ptr("me")}, nil)
	svc := testService("web", "e2000031-0000-0000-0000-000000000000", map[string]string{
		annotations.KeyIPv4: pipAddress(user), annotations.KeyDNSLabelName: "mylabel"}, 80)
	label := func(rg, name string) string {
		pip := h.pip(t, rg, name)
		if pip.Properties == nil || pip.Properties.DNSSettings == nil {
			return ""
		}
		return ptr.Deref(pip.Properties.DNSSettings.DomainNameLabel, "")
	}
	for _, want := range []string{"mylabel", "otherlabel"} {
		svc.Annotations[annotations.KeyDNSLabelName] = want
		if _, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", svc, nodes); err != nil {
			t.Fatal(err)
		}
		if got := label(devenv.ResourceGroup, "my-ip"); got != want {
			t.Errorf("user's public IP has DNS label %q, want %q", got, want)
		}
	}
	if tags := tagMap(h.pip(t, devenv.ResourceGroup, "my-ip").Tags); len(tags) != 1 || tags["owner"] != "me" {
		t.Errorf("user's public IP retagged: %v", tags)
	}
	h.env.Emulator().ResetRequests()
	if _, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", svc, nodes); err != nil {
		t.Fatal(err)
	}
	if w := h.writes(); w != 0 {
		t.Errorf("%d writes with the label in place, want 0", w)
	}

	owned := testService("api", "e2000032-0000-0000-0000-000000000000", map[string]string{annotations.KeyDNSLabelName: "api-one"}, 80)
	if _, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", owned, nodes); err != nil {
		t.Fatal(err)
	}
	owned.Annotations[annotations.KeyDNSLabelName] = "api-two"
	if _, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", owned, nodes); err != nil {
		t.Fatal(err)
	}
	if got := label(devenv.ResourceGroup, names.PublicIP("kubernetes", owned, v1.IPv4Protocol)); got != "api-two" {
		t.Errorf("owned public IP has DNS label %q after the change, want api-two", got)
	}
}

// replaceFixture is a Service served from prefix "old-prefix", and a second
// prefix "new-prefix" to move it to.
type replaceFixture struct {
	h         *harness
	svc       *v1.Service
	nodes     []*v1.Node
	pipName   string
	oldAddr   string
	newPrefix *armnetwork.PublicIPPrefix
	newBlock  netip.Prefix
	oldPrefix *armnetwork.PublicIPPrefix
	oldPIPID  string
	oldIPTags string
	oldGUID   string
}

func newReplaceFixture(t *testing.T) *replaceFixture {
	t.Helper()
	h := newHarness(t, nil)
	f := &replaceFixture{h: h, nodes: []*v1.Node{testNode("n1", "10.240.0.4")}}
	f.oldPrefix = putPrefix(t, h, "old-prefix", 30)
	f.newPrefix = putPrefix(t, h, "new-prefix", 30)
	f.newBlock = netip.MustParsePrefix(ptr.Deref(f.newPrefix.Properties.IPPrefix, ""))
	f.svc = testService("moving", "e4000001-0000-0000-0000-000000000000", map[string]string{
		annotations.KeyPIPPrefixID: ptr.Deref(f.oldPrefix.ID, ""),
		annotations.KeyPIPIPTags:   "RoutingPreference=Internet",
	}, 80)
	st, err := h.p.EnsureLoadBalancer(context.Background(), "kubernetes", f.svc, f.nodes)
	if err != nil {
		t.Fatal(err)
	}
	// A neighbour on the same load balancer: the replacement removes the
	// Service's frontend with a write of the load balancer, which stays.
	neighbour := testService("neighbour", "e4000009-0000-0000-0000-000000000000", nil, 8080)
	if _, err := h.p.EnsureLoadBalancer(context.Background(), "kubernetes", neighbour, f.nodes); err != nil {
		t.Fatal(err)
	}
	f.oldAddr = st.Ingress[0].IP
	f.pipName = names.PublicIP("kubernetes", f.svc, v1.IPv4Protocol)
	pip := h.pip(t, devenv.ResourceGroup, f.pipName)
	f.oldPIPID, f.oldIPTags, f.oldGUID = ptr.Deref(pip.ID, ""), ipTagsString(pip), ptr.Deref(pip.Properties.ResourceGUID, "")
	drain(h.recorder)
	return f
}

// served checks that the Service is served by its public IP, which has
// the address want: the frontend uses it, the status says it, and no
// other public IP of the resource group is the Service's (none leaked).
func (f *replaceFixture) served(t *testing.T, st *v1.LoadBalancerStatus, want string) *armnetwork.PublicIPAddress {
	t.Helper()
	pip := f.h.pip(t, devenv.ResourceGroup, f.pipName)
	if got := pipAddress(pip); got != want {
		t.Fatalf("public IP %s has address %s, want %s", f.pipName, got, want)
	}
	if st == nil || len(st.Ingress) != 1 || st.Ingress[0].IP != want {
		t.Fatalf("status %+v, want ingress %s", st, want)
	}
	fe := findFrontend(f.h.lb(t, "kubernetes"), names.Frontend(f.svc, v1.IPv4Protocol))
	if fe == nil || !idEqual(ptr.Deref(fe.Properties.PublicIPAddress.ID, ""), ptr.Deref(pip.ID, "")) {
		t.Fatalf("frontend %+v does not use public IP %s", fe, ptr.Deref(pip.ID, ""))
	}
	pips, err := f.h.clients.PublicIP.List(context.Background(), devenv.ResourceGroup)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pips {
		if p.Properties != nil && ptr.Deref(p.Properties.IPAddress, "") == f.oldAddr && f.oldAddr != want {
			t.Fatalf("public IP %s still holds the old address %s", ptr.Deref(p.Name, ""), f.oldAddr)
		}
		if p.Tags != nil && tagValue(p.Tags, names.TagServiceName) == "default/moving" && ptr.Deref(p.Name, "") != f.pipName {
			t.Fatalf("leaked public IP %s of the Service", ptr.Deref(p.Name, ""))
		}
	}
	return pip
}

// A changed azure-pip-prefix-id on a Service whose public IP azlb created
// for it alone replaces the public IP: a new address from the new prefix,
// the old public IP gone, the frontend on the new one, a Normal event; the
// next reconcile writes nothing (issue 40 item 4).
func TestPrefixChangeReplacesOwnedPublicIP(t *testing.T) {
	f := newReplaceFixture(t)
	h, ctx := f.h, context.Background()
	f.svc.Annotations[annotations.KeyPIPPrefixID] = ptr.Deref(f.newPrefix.ID, "")
	st, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", f.svc, f.nodes)
	if err != nil {
		t.Fatal(err)
	}
	newAddr := st.Ingress[0].IP
	if !f.newBlock.Contains(netip.MustParseAddr(newAddr)) {
		t.Fatalf("address %s is not from the new prefix %s", newAddr, f.newBlock)
	}
	pip := f.served(t, st, newAddr)
	if !strings.EqualFold(pipPrefixID(pip), ptr.Deref(f.newPrefix.ID, "")) || ipTagsString(pip) != f.oldIPTags {
		t.Fatalf("new public IP: prefix %s, IP tags %s", pipPrefixID(pip), ipTagsString(pip))
	}
	ev := strings.Join(drain(h.recorder), "\n")
	if !strings.Contains(ev, "Normal "+EventReasonPublicIPReplaced) || !strings.Contains(ev, f.oldAddr) || !strings.Contains(ev, newAddr) ||
		!strings.Contains(ev, annotations.KeyPIPPrefixID) || strings.Contains(ev, "Warning") {
		t.Fatalf("events %q, want one Normal %s from %s to %s naming %s", ev, EventReasonPublicIPReplaced, f.oldAddr, newAddr, annotations.KeyPIPPrefixID)
	}
	h.env.Emulator().ResetRequests()
	if _, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", f.svc, f.nodes); err != nil {
		t.Fatal(err)
	}
	if w := h.writes(); w != 0 {
		t.Errorf("the reconcile after the replacement made %d writes, want 0", w)
	}
}

// A changed azure-pip-ip-tags replaces the owned public IP the same way.
func TestIPTagsChangeReplacesOwnedPublicIP(t *testing.T) {
	f := newReplaceFixture(t)
	h, ctx := f.h, context.Background()
	f.svc.Annotations[annotations.KeyPIPIPTags] = "RoutingPreference=Microsoft"
	st, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", f.svc, f.nodes)
	if err != nil {
		t.Fatal(err)
	}
	// The /30 may give the new public IP the old address again.
	pip := f.served(t, st, st.Ingress[0].IP)
	if g := ptr.Deref(pip.Properties.ResourceGUID, ""); g == "" || g == f.oldGUID {
		t.Fatalf("public IP %s was not created anew (resource GUID %q)", f.pipName, g)
	}
	if got := ipTagsString(pip); got != "RoutingPreference=Microsoft" || !strings.EqualFold(pipPrefixID(pip), ptr.Deref(f.oldPrefix.ID, "")) {
		t.Fatalf("new public IP: IP tags %s, prefix %s", got, pipPrefixID(pip))
	}
	ev := strings.Join(drain(h.recorder), "\n")
	if !strings.Contains(ev, EventReasonPublicIPReplaced) || !strings.Contains(ev, annotations.KeyPIPIPTags) || strings.Contains(ev, EventReasonPublicIPUnchangeable) {
		t.Fatalf("events %q, want %s naming %s", ev, EventReasonPublicIPReplaced, annotations.KeyPIPIPTags)
	}
}

// A new prefix the public IP cannot come from (missing) refuses the
// change in the plan: nothing is written, the Service keeps its address.
func TestUnusablePrefixChangeWritesNothing(t *testing.T) {
	f := newReplaceFixture(t)
	h, ctx := f.h, context.Background()
	missing := strings.Replace(ptr.Deref(f.newPrefix.ID, ""), "new-prefix", "no-such-prefix", 1)
	f.svc.Annotations[annotations.KeyPIPPrefixID] = missing
	h.env.Emulator().ResetRequests()
	if _, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", f.svc, f.nodes); err == nil || !IsRefusal(err) {
		t.Fatalf("err %v, want a refusal", err)
	}
	if w := h.writes(); w != 0 {
		t.Errorf("refused change made %d writes, want 0", w)
	}
	ev := strings.Join(drain(h.recorder), "\n")
	if !strings.Contains(ev, EventReasonPublicIPPrefixUnusable) || !strings.Contains(ev, missing) || strings.Contains(ev, EventReasonPublicIPReplaced) {
		t.Fatalf("events %q, want %s naming %s", ev, EventReasonPublicIPPrefixUnusable, missing)
	}
	f.served(t, &v1.LoadBalancerStatus{Ingress: []v1.LoadBalancerIngress{{IP: f.oldAddr}}}, f.oldAddr)
	if pip := h.pip(t, devenv.ResourceGroup, f.pipName); ptr.Deref(pip.ID, "") != f.oldPIPID || !strings.EqualFold(pipPrefixID(pip), ptr.Deref(f.oldPrefix.ID, "")) {
		t.Fatalf("public IP changed: %s from %s", ptr.Deref(pip.ID, ""), pipPrefixID(pip))
	}
}

// A failure at any step of the replacement (removing the frontend,
// deleting the old public IP, creating the new one) fails the reconcile,
// and the next one converges: the new address, nothing leaked.
func TestPublicIPReplacementResumes(t *testing.T) {
	for _, step := range []struct{ name, method, path string }{
		{"detach", http.MethodPut, `(?i)/loadBalancers/kubernetes$`},
		{"delete", http.MethodDelete, `(?i)/publicIPAddresses/`},
		{"create", http.MethodPut, `(?i)/publicIPAddresses/`},
	} {
		t.Run(step.name, func(t *testing.T) {
			f := newReplaceFixture(t)
			h, ctx := f.h, context.Background()
			f.svc.Annotations[annotations.KeyPIPPrefixID] = ptr.Deref(f.newPrefix.ID, "")
			if _, err := h.env.Emulator().AddFault(emulator.Fault{Method: step.method, PathRegex: step.path, Status: http.StatusBadRequest, Code: "InjectedFailure", Count: 1}); err != nil {
				t.Fatal(err)
			}
			if _, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", f.svc, f.nodes); err == nil {
				t.Fatal("the reconcile with a failed step succeeded")
			}
			st, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", f.svc, f.nodes)
			if err != nil {
				t.Fatalf("the next reconcile: %v", err)
			}
			if !f.newBlock.Contains(netip.MustParseAddr(st.Ingress[0].IP)) {
				t.Fatalf("address %s is not from the new prefix %s", st.Ingress[0].IP, f.newBlock)
			}
			f.served(t, st, st.Ingress[0].IP)
		})
	}
}

// A public IP the Service names by azure-pip-name that azlb did not create
// is never replaced, nor one azlb created that several Services share: a
// Warning says why, nothing of the public IP is written.
func TestPublicIPNotReplaced(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()
	nodes := []*v1.Node{testNode("n1", "10.240.0.4")}
	prefix := putPrefix(t, h, "p", 30)
	putPublicIP(t, h, devenv.ResourceGroup, "users-ip", map[string]*string{"owner": ptr.To("me")}, nil)
	svc := testService("byname", "e4000002-0000-0000-0000-000000000000", map[string]string{annotations.KeyPIPName: "users-ip"}, 80)
	if _, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", svc, nodes); err != nil {
		t.Fatal(err)
	}
	user := h.pip(t, devenv.ResourceGroup, "users-ip")
	svc.Annotations[annotations.KeyPIPPrefixID] = ptr.Deref(prefix.ID, "")
	h.env.Emulator().ResetRequests()
	if _, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", svc, nodes); err != nil {
		t.Fatal(err)
	}
	if w := h.writes(); w != 0 {
		t.Errorf("user's public IP: %d writes, want 0", w)
	}
	if got := h.pip(t, devenv.ResourceGroup, "users-ip"); pipAddress(got) != pipAddress(user) || ptr.Deref(got.Etag, "") != ptr.Deref(user.Etag, "") {
		t.Errorf("the user's public IP changed")
	}

	shared := testService("shared", "e4000003-0000-0000-0000-000000000000", nil, 80)
	if _, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", shared, nodes); err != nil {
		t.Fatal(err)
	}
	name := names.PublicIP("kubernetes", shared, v1.IPv4Protocol)
	pip := h.pip(t, devenv.ResourceGroup, name)
	pip.Tags[names.TagServiceName] = ptr.To("default/shared,default/other")
	if _, err := h.clients.PublicIP.CreateOrUpdate(ctx, devenv.ResourceGroup, name, *pip, ""); err != nil {
		t.Fatal(err)
	}
	drain(h.recorder)
	shared.Annotations = map[string]string{annotations.KeyPIPPrefixID: ptr.Deref(prefix.ID, "")}
	h.env.Emulator().ResetRequests()
	if _, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", shared, nodes); err != nil {
		t.Fatal(err)
	}
	if w := h.writes(); w != 0 {
		t.Errorf("shared public IP: %d writes, want 0", w)
	}
	ev := strings.Join(drain(h.recorder), "\n")
	if !strings.Contains(ev, EventReasonPublicIPUnchangeable) || !strings.Contains(ev, "shared by the Services") || strings.Contains(ev, EventReasonPublicIPReplaced) {
		t.Errorf("events %q, want %s saying it is shared", ev, EventReasonPublicIPUnchangeable)
	}
	if got := h.pip(t, devenv.ResourceGroup, name); pipAddress(got) != pipAddress(pip) {
		t.Errorf("shared public IP changed address")
	}
}
