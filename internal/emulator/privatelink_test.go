package emulator

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

const otherSub = "22222222-3333-4444-5555-666666666666"

// seedPLS is seedHandler plus subnet "pls" (10.0.1.0/24, private link
// service network policies Disabled) and an internal Standard load
// balancer "ilb" with frontends "fe" and "fe2" in subnet "nodes".
func seedPLS(t testing.TB) *handlerEnv {
	t.Helper()
	h := seedHandler(t)
	h.mustDo(t, 201, http.MethodPut, netPath("rg", "virtualNetworks", "vnet")[:len(netPath("rg", "virtualNetworks", "vnet"))-len("?api-version="+NetworkAPIVersion)]+
		"/subnets/pls?api-version="+NetworkAPIVersion,
		`{"properties":{"addressPrefix":"10.0.1.0/24","privateLinkServiceNetworkPolicies":"Disabled"}}`)
	nodes := netID("rg", "virtualNetworks", "vnet") + "/subnets/nodes"
	h.mustDo(t, 201, http.MethodPut, netPath("rg", "loadBalancers", "ilb"), fmt.Sprintf(`{"location":"eastus","sku":{"name":"Standard"},"properties":{
		"frontendIPConfigurations":[{"name":"fe","properties":{"subnet":{"id":%q}}},{"name":"fe2","properties":{"subnet":{"id":%q}}}]}}`, nodes, nodes))
	return h
}

func subnetID(name string) string { return netID("rg", "virtualNetworks", "vnet") + "/subnets/" + name }
func feID(lb, fe string) string {
	return netID("rg", "loadBalancers", lb) + "/frontendIPConfigurations/" + fe
}

// plsBody is a private link service on frontend fe with n NAT ip
// configurations in subnet; extra is spliced into properties.
func plsBody(fe, subnet string, n int, extra string) string {
	var cfgs []string
	for i := 0; i < n; i++ {
		cfgs = append(cfgs, fmt.Sprintf(`{"name":"nat%d","properties":{"primary":%v,"subnet":{"id":%q}}}`, i, i == 0, subnet))
	}
	return fmt.Sprintf(`{"location":"eastus","properties":{"loadBalancerFrontendIpConfigurations":[{"id":%q}],"ipConfigurations":[%s]%s}}`,
		fe, strings.Join(cfgs, ","), extra)
}

func TestPrivateLinkServiceValidation(t *testing.T) {
	h := seedPLS(t)
	pls := subnetID("pls")
	cases := []struct {
		name, body string
		status     int
		code       string
	}{
		{"no frontend", `{"location":"eastus","properties":{"ipConfigurations":[]}}`, 400, "PrivateLinkServiceMissingLoadBalancerFrontendIpConfigurations"},
		{"missing frontend", plsBody(feID("ilb", "nope"), pls, 1, ""), 400, "InvalidResourceReference"},
		{"no ip configuration", plsBody(feID("ilb", "fe"), pls, 0, ""), 400, "PrivateLinkServiceIpConfigurationsRequired"},
		{"subnet with policies enabled", plsBody(feID("ilb", "fe"), subnetID("nodes"), 1, ""), 400, "PrivateLinkServiceCannotBeCreatedInSubnetThatHasNetworkPoliciesEnabled"},
		{"nine ip configurations", plsBody(feID("ilb", "fe"), pls, 9, ""), 400, "PrivateLinkServiceIpConfigurationCountExceedsLimit"},
		{"no primary", strings.Replace(plsBody(feID("ilb", "fe"), pls, 2, ""), `"primary":true`, `"primary":false`, 1), 400, "PrivateLinkServiceMustHaveOnePrimaryIpConfiguration"},
		{"ipv6 nat", strings.Replace(plsBody(feID("ilb", "fe"), pls, 1, ""), `"primary":true`, `"primary":true,"privateIPAddressVersion":"IPv6"`, 1), 400, "PrivateLinkServiceIpConfigurationIPv6NotSupported"},
		{"bad visibility", plsBody(feID("ilb", "fe"), pls, 1, `,"visibility":{"subscriptions":["not-a-guid"]}`), 400, "InvalidSubscriptionId"},
		{"auto approval outside visibility", plsBody(feID("ilb", "fe"), pls, 1, `,"visibility":{"subscriptions":["`+otherSub+`"]},"autoApproval":{"subscriptions":["`+testSub+`"]}`), 400, "PrivateLinkServiceAutoApprovalNotSubsetOfVisibility"},
		{"proxy protocol not a boolean", plsBody(feID("ilb", "fe"), pls, 1, `,"enableProxyProtocol":"yes"`), 400, "InvalidRequestFormat"},
		{"eight ip configurations", plsBody(feID("ilb", "fe"), pls, 8, ""), 201, ""},
		{"ip configuration removed", plsBody(feID("ilb", "fe"), pls, 7, ""), 400, "PrivateLinkServiceIpConfigurationCannotBeDeleted"},
		{"other frontend of the same load balancer", plsBody(feID("ilb", "fe2"), pls, 8, ""), 200, ""},
		{"load balancer changed", plsBody(feID("lb", "fe"), pls, 8, ""), 400, "PrivateLinkServiceLoadBalancerCannotBeChanged"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := h.do(t, http.MethodPut, netPath("rg", "privateLinkServices", "svc"), tc.body, nil)
			if rec.Code != tc.status || errCodeOf(rec) != tc.code {
				t.Fatalf("%d %q, want %d %q: %s", rec.Code, errCodeOf(rec), tc.status, tc.code, rec.Body)
			}
		})
	}
	// A second service may not take a frontend the first one serves.
	rec := h.do(t, http.MethodPut, netPath("rg", "privateLinkServices", "svc2"), plsBody(feID("ilb", "fe2"), pls, 1, ""), nil)
	if rec.Code != 400 || errCodeOf(rec) != "LoadBalancerFrontendIpConfigurationInUseByAnotherPrivateLinkService" {
		t.Fatalf("shared frontend: %d %s", rec.Code, rec.Body)
	}
	// A public Standard frontend is accepted, as the recordings show.
	h.mustDo(t, 201, http.MethodPut, netPath("rg", "privateLinkServices", "public"), plsBody(feID("lb", "fe"), pls, 1, ""))
}

func TestPrivateLinkServiceDocument(t *testing.T) {
	h := seedPLS(t)
	body := strings.Replace(plsBody(feID("ilb", "fe"), subnetID("pls"), 2, `,"fqdns":["a.example.com"],"enableProxyProtocol":true,"visibility":{"subscriptions":["*"]},"autoApproval":{"subscriptions":["`+otherSub+`"]}`),
		`"name":"nat1","properties":{`, `"name":"nat1","properties":{"privateIPAllocationMethod":"Static","privateIPAddress":"10.0.1.200",`, 1)
	h.mustDo(t, 201, http.MethodPut, netPath("rg", "privateLinkServices", "svc"), body)
	// An update sending its own static NAT address again is no conflict.
	h.mustDo(t, 200, http.MethodPut, netPath("rg", "privateLinkServices", "svc"), body)
	doc := h.mustDo(t, 200, http.MethodGet, netPath("rg", "privateLinkServices", "svc"), "")
	p := doc["properties"].(map[string]any)
	if a := p["alias"].(string); !strings.HasPrefix(a, "svc.") || !strings.HasSuffix(a, ".eastus.azure.privatelinkservice") {
		t.Errorf("alias %q", a)
	}
	if p["enableProxyProtocol"] != true || len(p["fqdns"].([]any)) != 1 || len(p["networkInterfaces"].([]any)) != 1 {
		t.Errorf("properties %v", p)
	}
	cfgs := p["ipConfigurations"].([]any)
	c0 := cfgs[0].(map[string]any)["properties"].(map[string]any)
	c1 := cfgs[1].(map[string]any)["properties"].(map[string]any)
	if _, shown := c0["privateIPAddress"]; shown || c0["privateIPAllocationMethod"] != "Dynamic" {
		t.Errorf("dynamic NAT ip configuration shows %v (ARM shows no address)", c0)
	}
	if c1["privateIPAddress"] != "10.0.1.200" || c1["privateIPAllocationMethod"] != "Static" {
		t.Errorf("static NAT ip configuration %v", c1)
	}
	for k := range p {
		if strings.HasPrefix(k, "_") {
			t.Errorf("internal member %s rendered", k)
		}
	}
	// NAT addresses occupy the subnet: the subnet cannot be deleted, and a
	// frontend allocated there does not get a NAT address.
	sub := netPath("rg", "virtualNetworks", "vnet")
	sub = sub[:strings.Index(sub, "?")] + "/subnets/pls?api-version=" + NetworkAPIVersion
	if rec := h.do(t, http.MethodDelete, sub, "", nil); rec.Code != 400 || errCodeOf(rec) != "InUseSubnetCannotBeDeleted" {
		t.Errorf("subnet delete under a private link service: %d %s", rec.Code, rec.Body)
	}
	rec := h.do(t, http.MethodPut, netPath("rg", "loadBalancers", "ilb2"), fmt.Sprintf(`{"location":"eastus","sku":{"name":"Standard"},"properties":{
		"frontendIPConfigurations":[{"name":"fe","properties":{"subnet":{"id":%q},"privateIPAllocationMethod":"Static","privateIPAddress":"10.0.1.200"}}]}}`, subnetID("pls")), nil)
	if rec.Code != 400 || errCodeOf(rec) != "PrivateIPAddressInUse" {
		t.Fatalf("frontend on the static NAT address: %d %s", rec.Code, rec.Body)
	}
	rec = h.do(t, http.MethodPut, netPath("rg", "loadBalancers", "ilb2"), fmt.Sprintf(`{"location":"eastus","sku":{"name":"Standard"},"properties":{
		"frontendIPConfigurations":[{"name":"fe","properties":{"subnet":{"id":%q}}}]}}`, subnetID("pls")), nil)
	if rec.Code != 201 {
		t.Fatalf("ilb2: %d %s", rec.Code, rec.Body)
	}
	var lb map[string]any
	_ = json.Unmarshal(rec.Body.Bytes(), &lb)
	fe := lb["properties"].(map[string]any)["frontendIPConfigurations"].([]any)[0].(map[string]any)["properties"].(map[string]any)
	if fe["privateIPAddress"] == "10.0.1.200" {
		t.Errorf("a frontend got the static NAT address")
	}
}

func TestFrontendInUseByPrivateLinkService(t *testing.T) {
	h := seedPLS(t)
	h.mustDo(t, 201, http.MethodPut, netPath("rg", "privateLinkServices", "svc"), plsBody(feID("ilb", "fe"), subnetID("pls"), 1, ""))
	nodes := subnetID("nodes")
	onlyFe2 := fmt.Sprintf(`{"location":"eastus","sku":{"name":"Standard"},"properties":{
		"frontendIPConfigurations":[{"name":"fe2","properties":{"subnet":{"id":%q}}}]}}`, nodes)
	rec := h.do(t, http.MethodPut, netPath("rg", "loadBalancers", "ilb"), onlyFe2, nil)
	if rec.Code != 400 || errCodeOf(rec) != "LoadBalancerFrontendIpConfigurationInUseByPrivateLinkService" {
		t.Fatalf("frontend removal: %d %s", rec.Code, rec.Body)
	}
	rec = h.do(t, http.MethodDelete, netPath("rg", "loadBalancers", "ilb"), "", nil)
	if rec.Code != 400 || errCodeOf(rec) != "LoadBalancerFrontendIpConfigurationInUseByPrivateLinkService" {
		t.Fatalf("load balancer delete: %d %s", rec.Code, rec.Body)
	}
	h.mustDo(t, 202, http.MethodDelete, netPath("rg", "privateLinkServices", "svc"), "")
	h.mustDo(t, 200, http.MethodPut, netPath("rg", "loadBalancers", "ilb"), onlyFe2)
}

// connOf returns the one connection's state of a private endpoint document.
func connOf(t *testing.T, doc map[string]any) (status, desc string) {
	t.Helper()
	p := doc["properties"].(map[string]any)
	for _, key := range []string{"privateLinkServiceConnections", "manualPrivateLinkServiceConnections"} {
		for _, c := range p[key].([]any) {
			st := c.(map[string]any)["properties"].(map[string]any)["privateLinkServiceConnectionState"].(map[string]any)
			return st["status"].(string), st["description"].(string)
		}
	}
	t.Fatalf("no connection in %v", p)
	return "", ""
}

func peBody(subnet, pls string, manual bool) string {
	key := "privateLinkServiceConnections"
	if manual {
		key = "manualPrivateLinkServiceConnections"
	}
	return fmt.Sprintf(`{"location":"eastus","properties":{"subnet":{"id":%q},%q:[{"name":"c","properties":{"privateLinkServiceId":%q}}]}}`, subnet, key, pls)
}

func plsConns(t *testing.T, h *handlerEnv) []any {
	t.Helper()
	doc := h.mustDo(t, 200, http.MethodGet, netPath("rg", "privateLinkServices", "svc"), "")
	return doc["properties"].(map[string]any)["privateEndpointConnections"].([]any)
}

func TestPrivateEndpointConnectionLifecycle(t *testing.T) {
	h := seedPLS(t)
	h.mustDo(t, 201, http.MethodPut, netPath("rg", "privateLinkServices", "svc"), plsBody(feID("ilb", "fe"), subnetID("pls"), 1, `,"fqdns":["svc.example.com"]`))
	svc := netID("rg", "privateLinkServices", "svc")

	// Same subscription, automatic: approved at once, as recorded.
	pe := h.mustDo(t, 201, http.MethodPut, netPath("rg", "privateEndpoints", "auto"), peBody(subnetID("nodes"), svc, false))
	if st, d := connOf(t, pe); st != "Approved" || d != "Auto Approved" {
		t.Fatalf("automatic connection: %s %q", st, d)
	}
	dns := pe["properties"].(map[string]any)["customDnsConfigs"].([]any)
	if len(dns) != 1 || dns[0].(map[string]any)["fqdn"] != "svc.example.com" {
		t.Errorf("customDnsConfigs %v", dns)
	}
	// Manual: Pending until the owner decides.
	pe = h.mustDo(t, 201, http.MethodPut, netPath("rg", "privateEndpoints", "manual"), peBody(subnetID("nodes"), svc, true))
	if st, _ := connOf(t, pe); st != "Pending" {
		t.Fatalf("manual connection: %s", st)
	}
	h.mustDo(t, 201, http.MethodPut, netPath("rg", "privateEndpoints", "manual2"), peBody(subnetID("nodes"), svc, true))
	conns := plsConns(t, h)
	if len(conns) != 3 {
		t.Fatalf("service lists %d connections, want 3", len(conns))
	}
	connPath := func(c any) string {
		id := c.(map[string]any)["id"].(string)
		return id + "?api-version=" + NetworkAPIVersion
	}
	byEndpoint := map[string]any{}
	for _, c := range conns {
		pe := c.(map[string]any)["properties"].(map[string]any)["privateEndpoint"].(map[string]any)["id"].(string)
		byEndpoint[pe[strings.LastIndexByte(pe, '/')+1:]] = c
	}
	// Approve one, reject the other.
	h.mustDo(t, 200, http.MethodPut, connPath(byEndpoint["manual"]), `{"properties":{"privateLinkServiceConnectionState":{"status":"approved","description":"ok"}}}`)
	if st, d := connOf(t, h.mustDo(t, 200, http.MethodGet, netPath("rg", "privateEndpoints", "manual"), "")); st != "Approved" || d != "ok" {
		t.Fatalf("approved: endpoint shows %s %q", st, d)
	}
	h.mustDo(t, 200, http.MethodPut, connPath(byEndpoint["manual2"]), `{"properties":{"privateLinkServiceConnectionState":{"status":"Rejected"}}}`)
	if st, _ := connOf(t, h.mustDo(t, 200, http.MethodGet, netPath("rg", "privateEndpoints", "manual2"), "")); st != "Rejected" {
		t.Fatalf("rejected: endpoint shows %s", st)
	}
	rec := h.do(t, http.MethodPut, connPath(byEndpoint["manual2"]), `{"properties":{"privateLinkServiceConnectionState":{"status":"Approved"}}}`, nil)
	if rec.Code != 400 || errCodeOf(rec) != "InvalidPrivateEndpointConnectionStateTransition" {
		t.Fatalf("rejected to approved: %d %s", rec.Code, rec.Body)
	}
	rec = h.do(t, http.MethodPut, connPath(byEndpoint["manual2"]), `{"properties":{"privateLinkServiceConnectionState":{"status":"Bogus"}}}`, nil)
	if rec.Code != 400 {
		t.Fatalf("bogus status: %d %s", rec.Code, rec.Body)
	}
	// The service cannot go while it has connections.
	rec = h.do(t, http.MethodDelete, netPath("rg", "privateLinkServices", "svc"), "", nil)
	if rec.Code != 400 || errCodeOf(rec) != "CannotDeletePrivateLinkServiceWithPrivateEndpointConnections" {
		t.Fatalf("delete with connections: %d %s", rec.Code, rec.Body)
	}
	// The owner deletes connections: the endpoints show Disconnected.
	for _, n := range []string{"auto", "manual", "manual2"} {
		h.mustDo(t, 202, http.MethodDelete, connPath(byEndpoint[n]), "")
		if st, _ := connOf(t, h.mustDo(t, 200, http.MethodGet, netPath("rg", "privateEndpoints", n), "")); st != "Disconnected" {
			t.Fatalf("%s after the connection's deletion: %s", n, st)
		}
	}
	if n := len(plsConns(t, h)); n != 0 {
		t.Fatalf("%d connections left", n)
	}
	h.mustDo(t, 202, http.MethodDelete, netPath("rg", "privateLinkServices", "svc"), "")
}

func TestPrivateEndpointDeleteRemovesConnection(t *testing.T) {
	h := seedPLS(t)
	h.mustDo(t, 201, http.MethodPut, netPath("rg", "privateLinkServices", "svc"), plsBody(feID("ilb", "fe"), subnetID("pls"), 1, ""))
	svc := netID("rg", "privateLinkServices", "svc")
	h.mustDo(t, 201, http.MethodPut, netPath("rg", "privateEndpoints", "pe"), peBody(subnetID("nodes"), svc, false))
	// An update that keeps the connection keeps its state.
	h.mustDo(t, 200, http.MethodPut, netPath("rg", "privateEndpoints", "pe"), peBody(subnetID("nodes"), svc, false))
	if n := len(plsConns(t, h)); n != 1 {
		t.Fatalf("%d connections", n)
	}
	rec := h.do(t, http.MethodPut, netPath("rg", "privateEndpoints", "pe"), peBody(subnetID("nodes"), svc, true), nil)
	if rec.Code != 400 || errCodeOf(rec) != "PrivateEndpointConnectionCannotBeChanged" {
		t.Fatalf("connection changed: %d %s", rec.Code, rec.Body)
	}
	h.mustDo(t, 202, http.MethodDelete, netPath("rg", "privateEndpoints", "pe"), "")
	if n := len(plsConns(t, h)); n != 0 {
		t.Fatalf("%d connections after the endpoint's deletion", n)
	}
	h.mustDo(t, 202, http.MethodDelete, netPath("rg", "privateLinkServices", "svc"), "")
}

func TestPrivateEndpointVisibilityAndApproval(t *testing.T) {
	h := seedPLS(t)
	svc := netID("rg", "privateLinkServices", "svc")
	other := func(p string) string { return strings.Replace(p, testSub, otherSub, 1) }
	h.mustDo(t, 201, http.MethodPut, other(rgPath("consumer")), `{"location":"eastus"}`)
	h.mustDo(t, 201, http.MethodPut, other(netPath("consumer", "virtualNetworks", "cvnet")),
		`{"location":"eastus","properties":{"addressSpace":{"addressPrefixes":["10.9.0.0/16"]},"subnets":[{"name":"pe","properties":{"addressPrefix":"10.9.0.0/24"}}]}}`)
	csub := other(netID("consumer", "virtualNetworks", "cvnet") + "/subnets/pe")
	put := func(name, body string) (int, string) {
		rec := h.do(t, http.MethodPut, other(netPath("consumer", "privateEndpoints", name)), body, nil)
		return rec.Code, errCodeOf(rec)
	}

	h.mustDo(t, 201, http.MethodPut, netPath("rg", "privateLinkServices", "svc"), plsBody(feID("ilb", "fe"), subnetID("pls"), 1, ""))
	if code, c := put("a", peBody(csub, svc, true)); code != 400 || c != "PrivateLinkServiceNotVisibleToSubscription" {
		t.Fatalf("invisible service: %d %s", code, c)
	}
	h.mustDo(t, 200, http.MethodPut, netPath("rg", "privateLinkServices", "svc"), plsBody(feID("ilb", "fe"), subnetID("pls"), 1, `,"visibility":{"subscriptions":["`+otherSub+`"]}`))
	if code, c := put("a", peBody(csub, svc, false)); code != 400 || c != "PrivateEndpointConnectionRequiresManualApproval" {
		t.Fatalf("automatic without approval: %d %s", code, c)
	}
	if code, c := put("a", peBody(csub, svc, true)); code != 201 {
		t.Fatalf("manual: %d %s", code, c)
	}
	h.mustDo(t, 200, http.MethodPut, netPath("rg", "privateLinkServices", "svc"), plsBody(feID("ilb", "fe"), subnetID("pls"), 1,
		`,"visibility":{"subscriptions":["`+otherSub+`"]},"autoApproval":{"subscriptions":["`+otherSub+`"]}`))
	if code, c := put("b", peBody(csub, svc, false)); code != 201 {
		t.Fatalf("auto-approved: %d %s", code, c)
	}
	if st, _ := connOf(t, h.mustDo(t, 200, http.MethodGet, other(netPath("consumer", "privateEndpoints", "b")), "")); st != "Approved" {
		t.Fatalf("auto-approved endpoint shows %s", st)
	}
	if n := len(plsConns(t, h)); n != 2 {
		t.Fatalf("%d connections, want 2", n)
	}
}

// The data plane gets one derived rule per approved private endpoint and
// load balancing rule of the service's frontend, from the NAT address.
func TestPrivateEndpointDataPlaneRules(t *testing.T) {
	h := seedHandler(t)
	h.mustDo(t, 201, http.MethodPut, strings.Replace(netPath("rg", "virtualNetworks", "vnet"), "?", "/subnets/pls?", 1),
		`{"properties":{"addressPrefix":"10.0.1.0/24","privateLinkServiceNetworkPolicies":"Disabled"}}`)
	lb := netID("rg", "loadBalancers", "ilb")
	h.mustDo(t, 201, http.MethodPut, netPath("rg", "loadBalancers", "ilb"), fmt.Sprintf(`{"location":"eastus","sku":{"name":"Standard"},"properties":{
		"frontendIPConfigurations":[{"name":"fe","properties":{"subnet":{"id":%q},"privateIPAllocationMethod":"Static","privateIPAddress":"10.0.0.50"}}],
		"backendAddressPools":[{"name":"pool"}],
		"loadBalancingRules":[{"name":"http","properties":{"protocol":"Tcp","frontendPort":80,"backendPort":8080,
			"frontendIPConfiguration":{"id":%q},"backendAddressPool":{"id":%q}}}]}}`, subnetID("nodes"), lb+"/frontendIPConfigurations/fe", lb+"/backendAddressPools/pool"))
	h.mustDo(t, 201, http.MethodPut, netPath("rg", "privateLinkServices", "svc"), plsBody(feID("ilb", "fe"), subnetID("pls"), 1, `,"enableProxyProtocol":true`))
	svc := netID("rg", "privateLinkServices", "svc")
	h.mustDo(t, 201, http.MethodPut, netPath("rg", "privateEndpoints", "manual"), peBody(subnetID("nodes"), svc, true))
	derived := func() []string {
		cfg, _ := h.emu.dataPlaneConfig()
		var out []string
		for _, r := range cfg.Rules {
			if strings.Contains(r.ID, "|") {
				if !r.SourceNAT.IsValid() || !strings.HasPrefix(r.SourceNAT.String(), "10.0.1.") || !r.ProxyProtocol || r.LinkID == 0 || r.BackendPort != 8080 {
					t.Errorf("derived rule %+v", r)
				}
				out = append(out, r.Frontend.String())
			}
		}
		return out
	}
	if d := derived(); len(d) != 0 {
		t.Fatalf("a Pending connection is served: %v", d)
	}
	h.mustDo(t, 201, http.MethodPut, netPath("rg", "privateEndpoints", "auto"), peBody(subnetID("nodes"), svc, false))
	d := derived()
	if len(d) != 1 || !strings.HasPrefix(d[0], "10.0.0.") || !strings.HasSuffix(d[0], ":80") {
		t.Fatalf("derived rules %v", d)
	}
}

// FuzzPrivateLinkPUT: no body makes a Private Link Service, private
// endpoint or connection PUT answer a server error.
func FuzzPrivateLinkPUT(f *testing.F) {
	f.Add(0, plsBody(feID("ilb", "fe"), subnetID("pls"), 2, `,"fqdns":["a"],"visibility":{"subscriptions":["*"]}`))
	f.Add(0, `{"location":"eastus","properties":{"ipConfigurations":[{"name":"x","properties":{"subnet":7}}],"loadBalancerFrontendIpConfigurations":[{}]}}`)
	f.Add(0, `{"location":"eastus","properties":{"visibility":{"subscriptions":[1]},"autoApproval":[],"fqdns":"x","enableProxyProtocol":1}}`)
	f.Add(1, peBody(subnetID("nodes"), netID("rg", "privateLinkServices", "svc"), false))
	f.Add(1, `{"location":"eastus","properties":{"subnet":{"id":"x"},"privateLinkServiceConnections":[{"name":"c","properties":{"privateLinkServiceId":5}}]}}`)
	f.Add(2, `{"properties":{"privateLinkServiceConnectionState":{"status":"Approved"}}}`)
	f.Add(2, `{"properties":{"privateLinkServiceConnectionState":{"status":7,"description":[]}}}`)
	h := seedPLS(f)
	h.mustDo(f, 201, http.MethodPut, netPath("rg", "privateLinkServices", "svc"), plsBody(feID("ilb", "fe"), subnetID("pls"), 1, ""))
	h.mustDo(f, 201, http.MethodPut, netPath("rg", "privateEndpoints", "pe"), peBody(subnetID("nodes"), netID("rg", "privateLinkServices", "svc"), true))
	doc := h.mustDo(f, 200, http.MethodGet, netPath("rg", "privateLinkServices", "svc"), "")
	conn := doc["properties"].(map[string]any)["privateEndpointConnections"].([]any)[0].(map[string]any)["id"].(string) + "?api-version=" + NetworkAPIVersion
	f.Fuzz(func(t *testing.T, which int, body string) {
		var path string
		switch ((which % 3) + 3) % 3 {
		case 0:
			path = netPath("rg", "privateLinkServices", "fz")
		case 1:
			path = netPath("rg", "privateEndpoints", "fz")
		default:
			path = conn
		}
		checkNoServerError(t, http.MethodPut, path, body, h)
		checkNoServerError(t, http.MethodGet, path, "", h)
		checkNoServerError(t, http.MethodGet, netPath("rg", "privateLinkServices", "svc"), "", h)
	})
}
