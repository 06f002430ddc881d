package emulator

import (
	"encoding/json"
	"net/http"
	"net/netip"
	"strings"
	"testing"

	"github.com/azlb/azlb/internal/emulator/dataplane"
)

// Issue 27 item 2: Azure documents that "Floating IP for IPv6 does not work
// for Internal Load Balancers"; ARM accepts such a rule and the data path
// drops its traffic. The emulator accepts it too, and its data plane
// records it unserved with that reason, whatever else could be served.
func TestDataPlaneInternalIPv6FloatingIPIsUnserved(t *testing.T) {
	h := newHandlerEnv(t, Options{DataPlane: true})
	t.Cleanup(func() { _ = h.emu.Close() })
	h.mustDo(t, http.StatusCreated, http.MethodPut, rgPath("rg"), `{"location":"eastus"}`)
	h.mustDo(t, http.StatusCreated, http.MethodPut, netPath("rg", "virtualNetworks", "vnet"),
		`{"location":"eastus","properties":{"addressSpace":{"addressPrefixes":["10.0.0.0/16","fd00:db8::/48"]},`+
			`"subnets":[{"name":"nodes","properties":{"addressPrefixes":["10.0.0.0/24","fd00:db8::/64"]}}]}}`)
	h.mustDo(t, http.StatusCreated, http.MethodPut, netPath("rg", "publicIPAddresses", "pip6"),
		`{"location":"eastus","sku":{"name":"Standard"},"properties":{"publicIPAllocationMethod":"Static","publicIPAddressVersion":"IPv6"}}`)
	h.mustDo(t, http.StatusCreated, http.MethodPut, netPath("rg", "publicIPAddresses", "pip4"),
		`{"location":"eastus","sku":{"name":"Standard"},"properties":{"publicIPAllocationMethod":"Static"}}`)

	subnet := netID("rg", "virtualNetworks", "vnet") + "/subnets/nodes"
	rule := func(lb, name, fe string, port, backend int, floating bool) string {
		id := netID("rg", "loadBalancers", lb)
		b, _ := json.Marshal(map[string]any{"name": name, "properties": map[string]any{
			"protocol": "Tcp", "frontendPort": port, "backendPort": backend, "enableFloatingIP": floating,
			"frontendIPConfiguration": map[string]string{"id": id + "/frontendIPConfigurations/" + fe},
			"backendAddressPool":      map[string]string{"id": id + "/backendAddressPools/pool"}}})
		return string(b)
	}
	// The internal load balancer: ARM accepts every rule (201).
	h.mustDo(t, http.StatusCreated, http.MethodPut, netPath("rg", "loadBalancers", "ilb"),
		`{"location":"eastus","sku":{"name":"Standard"},"properties":{`+
			`"frontendIPConfigurations":[`+
			`{"name":"fe4","properties":{"subnet":{"id":"`+subnet+`"}}},`+
			`{"name":"fe6","properties":{"subnet":{"id":"`+subnet+`"},"privateIPAddressVersion":"IPv6"}}],`+
			`"backendAddressPools":[{"name":"pool"}],`+
			`"loadBalancingRules":[`+rule("ilb", "v6-floating", "fe6", 80, 80, true)+`,`+
			rule("ilb", "v6-nodeport", "fe6", 81, 30081, false)+`,`+
			rule("ilb", "v4-floating", "fe4", 80, 80, true)+`]}}`)
	// A public dual-stack load balancer: floating IP on its IPv6 frontend
	// works in Azure (the documented exception).
	h.mustDo(t, http.StatusCreated, http.MethodPut, netPath("rg", "loadBalancers", "plb"),
		`{"location":"eastus","sku":{"name":"Standard"},"properties":{`+
			`"frontendIPConfigurations":[`+
			`{"name":"fe4","properties":{"publicIPAddress":{"id":"`+netID("rg", "publicIPAddresses", "pip4")+`"}}},`+
			`{"name":"fe6","properties":{"publicIPAddress":{"id":"`+netID("rg", "publicIPAddresses", "pip6")+`"}}}],`+
			`"backendAddressPools":[{"name":"pool"}],`+
			`"loadBalancingRules":[`+rule("plb", "v6-floating", "fe6", 80, 80, true)+`]}}`)

	// The control API's view, as a client of /_emulator/dataplane sees it.
	rec := h.do(t, http.MethodGet, "/_emulator/dataplane", "", nil)
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /_emulator/dataplane: %d %s", rec.Code, rec.Body)
	}
	var st dataplane.Status
	if err := json.Unmarshal(rec.Body.Bytes(), &st); err != nil {
		t.Fatalf("status: %v: %s", err, rec.Body)
	}
	got := map[string]dataplane.RuleStatus{}
	for _, r := range st.Rules {
		lb, name, _ := strings.Cut(r.ID[strings.Index(r.ID, "/loadBalancers/")+len("/loadBalancers/"):], "/loadBalancingRules/")
		got[lb+"/"+name] = r
	}
	if len(got) != 4 {
		t.Fatalf("rules %v, want 4", st.Rules)
	}
	r := got["ilb/v6-floating"]
	if r.Served || r.Reason != dataplane.UnservedInternalIPv6FloatingIP || !r.FloatingIP {
		t.Errorf("internal IPv6 rule with floating IP: served %v, floatingIP %v, reason %q; want unserved with %q",
			r.Served, r.FloatingIP, r.Reason, dataplane.UnservedInternalIPv6FloatingIP)
	}
	if !strings.HasPrefix(r.Frontend, "[fd00:db8::") {
		t.Errorf("its frontend %q, want the private IPv6 address from the subnet", r.Frontend)
	}
	for _, k := range []string{"ilb/v6-nodeport", "ilb/v4-floating", "plb/v6-floating"} {
		if r := got[k]; r.Reason == dataplane.UnservedInternalIPv6FloatingIP {
			t.Errorf("%s: reason %q, want another (floating IP off, IPv4, or public)", k, r.Reason)
		}
	}
	// fd00:db8::/64 is not routed to the loopback device: not served, and
	// the reason says so (dataplane.Loopback).
	if r := got["ilb/v6-nodeport"]; r.Served || !strings.Contains(r.Reason, dataplane.ErrNotLoopback.Error()) {
		t.Errorf("internal IPv6 rule without floating IP: served %v, reason %q; want %q", r.Served, r.Reason, dataplane.ErrNotLoopback)
	}
}

// The sources of IPv6 probes are both in AzureLoadBalancer; only the first
// is in VirtualNetwork (whether Azure's link-local source is, is not
// documented: probes must pass from both). 168.63.129.16 is in both tags.
func TestDataPlaneIPv6ProbeSourcesInTags(t *testing.T) {
	h := newHandlerEnv(t, Options{DataPlane: true})
	t.Cleanup(func() { _ = h.emu.Close() })
	h.mustDo(t, http.StatusCreated, http.MethodPut, rgPath("rg"), `{"location":"eastus"}`)
	nsgID := netID("rg", "networkSecurityGroups", "nsg")
	h.mustDo(t, http.StatusCreated, http.MethodPut, netPath("rg", "networkSecurityGroups", "nsg"), nsgBody(
		secRule("allow-vnet", map[string]any{"priority": 100, "protocol": "*", "sourceAddressPrefix": "VirtualNetwork", "destinationPortRange": "*"}),
		secRule("deny-lb", map[string]any{"priority": 200, "access": "Deny", "protocol": "*", "sourceAddressPrefix": "AzureLoadBalancer", "destinationPortRange": "*"}),
	))
	h.mustDo(t, http.StatusCreated, http.MethodPut, netPath("rg", "virtualNetworks", "vnet"),
		`{"location":"eastus","properties":{"addressSpace":{"addressPrefixes":["10.0.0.0/16","fd00:db8::/48"]},`+
			`"subnets":[{"name":"nodes","properties":{"addressPrefixes":["10.0.0.0/24","fd00:db8::/64"],"networkSecurityGroup":{"id":"`+nsgID+`"}}}]}}`)
	h.mustDo(t, http.StatusCreated, http.MethodPut, netPath("rg", "publicIPAddresses", "pip"), `{"location":"eastus","sku":{"name":"Standard"}}`)
	h.mustDo(t, http.StatusCreated, http.MethodPut, netPath("rg", "loadBalancers", "lb"), lbBody("lb", "pip", ""))
	vnet := netID("rg", "virtualNetworks", "vnet")
	h.mustDo(t, http.StatusOK, http.MethodPut, strings.Replace(netPath("rg", "loadBalancers", "lb"), "?", "/backendAddressPools/pool?", 1),
		`{"properties":{"loadBalancerBackendAddresses":[{"name":"n6","properties":{"ipAddress":"fd00:db8::10","virtualNetwork":{"id":"`+vnet+`"}}}]}}`)
	cfg, _ := h.emu.dataPlaneConfig()
	if len(cfg.Rules) != 1 || len(cfg.Rules[0].Members) != 1 {
		t.Fatalf("config %+v", cfg)
	}
	sec := cfg.Rules[0].Members[0].Security
	dst := netip.MustParseAddrPort("[fd00:db8::10]:80")
	for _, tc := range []struct {
		src  netip.AddrPort
		want dataplane.Verdict
	}{
		{dataplane.ProbeSourcesIPv6[0], dataplane.Verdict{Allowed: true, NSG: nsgID, Rule: "allow-vnet"}},
		{dataplane.ProbeSourcesIPv6[1], dataplane.Verdict{NSG: nsgID, Rule: "deny-lb"}},
		{dataplane.ProbeSource, dataplane.Verdict{Allowed: true, NSG: nsgID, Rule: "allow-vnet"}},
		{netip.MustParseAddrPort("[fd00:db8:0:1::7]:40000"), dataplane.Verdict{Allowed: true, NSG: nsgID, Rule: "allow-vnet"}},
		{netip.MustParseAddrPort("[::1]:40000"), dataplane.Verdict{NSG: nsgID, Rule: "DenyAllInBound"}},
	} {
		if got := sec.Evaluate(dataplane.ProtocolTCP, tc.src, dst); got != tc.want {
			t.Errorf("from %s: %+v, want %+v", tc.src, got, tc.want)
		}
	}
}
