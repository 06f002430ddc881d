package emulator

import (
	"encoding/json"
	"net/http"
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
	if r := got["ilb/v6-nodeport"]; r.Served || !strings.Contains(r.Reason, "only IPv4 frontends are served") {
		t.Errorf("internal IPv6 rule without floating IP: served %v, reason %q; want IPv6's own reason", r.Served, r.Reason)
	}
}
