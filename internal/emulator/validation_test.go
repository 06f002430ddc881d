package emulator

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// seedHandler creates group rg with vnet "vnet" (10.0.0.0/16, subnet
// "nodes" 10.0.0.0/24), Standard public IPs "pip" and "pip2", Basic public
// IP "basic", and Standard LB "lb" using "pip".
func seedHandler(t testing.TB) *handlerEnv {
	t.Helper()
	return seedHandlerWith(t, Options{})
}

// seedHandlerWith is seedHandler with emulator options.
func seedHandlerWith(t testing.TB, o Options) *handlerEnv {
	t.Helper()
	h := newHandlerEnv(t, o)
	h.mustDo(t, 201, http.MethodPut, rgPath("rg"), `{"location":"eastus"}`)
	h.mustDo(t, 201, http.MethodPut, netPath("rg", "virtualNetworks", "vnet"),
		`{"location":"eastus","properties":{"addressSpace":{"addressPrefixes":["10.0.0.0/16"]},"subnets":[{"name":"nodes","properties":{"addressPrefix":"10.0.0.0/24"}}]}}`)
	for _, p := range []string{"pip", "pip2"} {
		h.mustDo(t, 201, http.MethodPut, netPath("rg", "publicIPAddresses", p), `{"location":"eastus","sku":{"name":"Standard"}}`)
	}
	h.mustDo(t, 201, http.MethodPut, netPath("rg", "publicIPAddresses", "basic"), `{"location":"eastus"}`)
	h.mustDo(t, 201, http.MethodPut, netPath("rg", "loadBalancers", "lb"), lbBody("lb", "pip", ""))
	return h
}

// lbBody is a Standard LB with frontend fe on pip, pool "pool", probe
// "probe" and rule "rule"; extra is spliced into properties.
func lbBody(lb, pip, extra string) string {
	id := netID("rg", "loadBalancers", lb)
	return fmt.Sprintf(`{"location":"eastus","sku":{"name":"Standard"},"properties":{
		"frontendIPConfigurations":[{"name":"fe","properties":{"publicIPAddress":{"id":%q}}}],
		"backendAddressPools":[{"name":"pool"}],
		"probes":[{"name":"probe","properties":{"protocol":"Tcp","port":80}}],
		"loadBalancingRules":[{"name":"rule","properties":{"protocol":"Tcp","frontendPort":80,"backendPort":80,
			"frontendIPConfiguration":{"id":%q},"backendAddressPool":{"id":%q},"probe":{"id":%q}}}]%s}}`,
		netID("rg", "publicIPAddresses", pip), id+"/frontendIPConfigurations/fe", id+"/backendAddressPools/pool", id+"/probes/probe", extra)
}

func TestLoadBalancerValidation(t *testing.T) {
	h := seedHandler(t)
	lbID := netID("rg", "loadBalancers", "lb2")
	cases := []struct {
		name, body string
		status     int
		code       string
	}{
		{"malformed json", `{"location":"eastus",`, 400, "InvalidRequestContent"},
		{"not an object", `[1,2]`, 400, "InvalidRequestContent"},
		{"trailing garbage", `{"location":"eastus"} x`, 400, "InvalidRequestContent"},
		{"properties wrong type", `{"location":"eastus","properties":"x"}`, 400, "InvalidRequestFormat"},
		{"no location", `{"properties":{}}`, 400, "LocationRequired"},
		{"name mismatch", `{"name":"other","location":"eastus"}`, 400, "InvalidRequestFormat"},
		{"bad sku", `{"location":"eastus","sku":{"name":"Premium"}}`, 400, "InvalidRequestFormat"},
		{"frontend without name", `{"location":"eastus","properties":{"frontendIPConfigurations":[{"properties":{}}]}}`, 400, "InvalidRequestFormat"},
		{"duplicate frontend", `{"location":"eastus","sku":{"name":"Standard"},"properties":{"frontendIPConfigurations":[{"name":"a","properties":{"publicIPAddress":{"id":"` + netID("rg", "publicIPAddresses", "pip2") + `"}}},{"name":"A","properties":{"publicIPAddress":{"id":"` + netID("rg", "publicIPAddresses", "pip2") + `"}}}]}}`, 400, "InvalidRequestFormat"},
		{"frontend without ip", `{"location":"eastus","properties":{"frontendIPConfigurations":[{"name":"a","properties":{}}]}}`, 400, "LoadBalancerFrontendIPConfigurationInvalid"},
		{"missing public ip", strings.Replace(lbBody("lb2", "pip2", ""), netID("rg", "publicIPAddresses", "pip2"), netID("rg", "publicIPAddresses", "nope"), 1), 400, "InvalidResourceReference"},
		{"sku mismatch", lbBody("lb2", "basic", ""), 400, "PublicIPAndLBSkuDoNotMatch"},
		{"public ip used by other lb", lbBody("lb2", "pip", ""), 400, "PublicIPAddressInUse"},
		{"rule to missing probe", strings.Replace(lbBody("lb2", "pip2", ""), lbID+"/probes/probe\"", lbID+"/probes/nope\"", 1), 400, "InvalidResourceReference"},
		{"rule to missing pool", strings.Replace(lbBody("lb2", "pip2", ""), lbID+"/backendAddressPools/pool\"", lbID+"/backendAddressPools/nope\"", 1), 400, "InvalidResourceReference"},
		{"rule to other lb's frontend", strings.Replace(lbBody("lb2", "pip2", ""), lbID+"/frontendIPConfigurations/fe", netID("rg", "loadBalancers", "lb")+"/frontendIPConfigurations/fe", 1), 400, "InvalidResourceReference"},
		{"rule port out of range", strings.Replace(lbBody("lb2", "pip2", ""), `"frontendPort":80`, `"frontendPort":70000`, 1), 400, "InvalidPortValue"},
		{"Tcp rule to backend port 0", strings.Replace(lbBody("lb2", "pip2", ""), `"backendPort":80`, `"backendPort":0`, 1), 400, "LoadBalancingRulePortZeroRequiresProtocolAll"},
		{"Tcp rule on frontend port 0", strings.Replace(lbBody("lb2", "pip2", ""), `"frontendPort":80`, `"frontendPort":0`, 1), 400, "LoadBalancingRulePortZeroRequiresProtocolAll"},
		{"rule port not a number", strings.Replace(lbBody("lb2", "pip2", ""), `"frontendPort":80`, `"frontendPort":"eighty"`, 1), 400, "InvalidRequestFormat"},
		{"rule bad protocol", strings.Replace(lbBody("lb2", "pip2", ""), `"protocol":"Tcp","frontendPort"`, `"protocol":"Sctp","frontendPort"`, 1), 400, "InvalidRequestFormat"},
		{"probe http without path", strings.Replace(lbBody("lb2", "pip2", ""), `"protocol":"Tcp","port":80`, `"protocol":"Http","port":80`, 1), 400, "ProbeRequestPathRequired"},
		{"valid", lbBody("lb2", "pip2", ""), 201, ""},
		{"update keeps working", lbBody("lb2", "pip2", ""), 200, ""},
		{"location change", strings.Replace(lbBody("lb2", "pip2", ""), `"location":"eastus"`, `"location":"westus"`, 1), 400, "InvalidResourceLocation"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := h.do(t, http.MethodPut, netPath("rg", "loadBalancers", "lb2"), tc.body, nil)
			if rec.Code != tc.status || errCodeOf(rec) != tc.code {
				t.Fatalf("%d %q, want %d %q: %s", rec.Code, errCodeOf(rec), tc.status, tc.code, rec.Body)
			}
		})
	}
}

func TestBackendPoolValidation(t *testing.T) {
	h := seedHandler(t)
	vnet := netID("rg", "virtualNetworks", "vnet")
	addr := func(props string) string {
		return `{"properties":{"loadBalancerBackendAddresses":[{"name":"a","properties":` + props + `}]}}`
	}
	cases := []struct {
		name, body string
		status     int
		code       string
	}{
		{"ip without vnet", addr(`{"ipAddress":"10.0.0.4"}`), 400, "BackendAddressVirtualNetworkRequired"},
		{"missing vnet", addr(`{"ipAddress":"10.0.0.4","virtualNetwork":{"id":"` + netID("rg", "virtualNetworks", "nope") + `"}}`), 400, "InvalidResourceReference"},
		{"missing subnet", addr(`{"ipAddress":"10.0.0.4","subnet":{"id":"` + vnet + `/subnets/nope"}}`), 400, "InvalidResourceReference"},
		{"bad ip", addr(`{"ipAddress":"10.0.0.400","virtualNetwork":{"id":"` + vnet + `"}}`), 400, "InvalidBackendAddressIPAddress"},
		{"bad admin state", addr(`{"ipAddress":"10.0.0.4","virtualNetwork":{"id":"` + vnet + `"},"adminState":"Drain"}`), 400, "InvalidRequestFormat"},
		{"admin state wrong type", addr(`{"ipAddress":"10.0.0.4","virtualNetwork":{"id":"` + vnet + `"},"adminState":1}`), 400, "InvalidRequestFormat"},
		{"addresses not array", `{"properties":{"loadBalancerBackendAddresses":{}}}`, 400, "InvalidRequestFormat"},
		{"duplicate names", `{"properties":{"loadBalancerBackendAddresses":[{"name":"a","properties":{"ipAddress":"10.0.0.4","virtualNetwork":{"id":"` + vnet + `"}}},{"name":"a","properties":{"ipAddress":"10.0.0.5","virtualNetwork":{"id":"` + vnet + `"}}}]}}`, 400, "DuplicateBackendAddressName"},
		{"duplicate ips", `{"properties":{"loadBalancerBackendAddresses":[{"name":"a","properties":{"ipAddress":"10.0.0.4","virtualNetwork":{"id":"` + vnet + `"}}},{"name":"b","properties":{"ipAddress":"10.0.0.4","virtualNetwork":{"id":"` + vnet + `"}}}]}}`, 400, "DuplicateBackendAddressIPAddress"},
		{"name mismatch", `{"name":"other","properties":{}}`, 400, "InvalidRequestFormat"},
		{"valid via subnet", addr(`{"ipAddress":"10.0.0.4","subnet":{"id":"` + vnet + `/subnets/nodes"}}`), 200, ""},
		{"valid admin state (case folded)", addr(`{"ipAddress":"10.0.0.4","virtualNetwork":{"id":"` + vnet + `"},"adminState":"down"}`), 200, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := h.do(t, http.MethodPut, strings.Replace(netPath("rg", "loadBalancers", "lb"), "?", "/backendAddressPools/pool?", 1), tc.body, nil)
			if rec.Code != tc.status || errCodeOf(rec) != tc.code {
				t.Fatalf("%d %q, want %d %q: %s", rec.Code, errCodeOf(rec), tc.status, tc.code, rec.Body)
			}
		})
	}
	pool := h.mustDo(t, 200, http.MethodGet, strings.Replace(netPath("rg", "loadBalancers", "lb"), "?", "/backendAddressPools/pool?", 1), "")
	addrs := pool["properties"].(map[string]any)["loadBalancerBackendAddresses"].([]any)
	if st := addrs[0].(map[string]any)["properties"].(map[string]any)["adminState"]; st != "Down" {
		t.Fatalf("adminState stored as %v, want canonical Down", st)
	}
	// Missing parent.
	rec := h.do(t, http.MethodPut, strings.Replace(netPath("rg", "loadBalancers", "nolb"), "?", "/backendAddressPools/pool?", 1), `{"properties":{}}`, nil)
	if rec.Code != 404 || errCodeOf(rec) != "ResourceNotFound" {
		t.Fatalf("pool of missing LB: %d %s", rec.Code, rec.Body)
	}
}

func TestPublicIPAndNetworkValidation(t *testing.T) {
	h := seedHandler(t)
	cases := []struct {
		name, path, body string
		status           int
		code             string
	}{
		{"standard dynamic", netPath("rg", "publicIPAddresses", "x"), `{"location":"eastus","sku":{"name":"Standard"},"properties":{"publicIPAllocationMethod":"Dynamic"}}`, 400, "StandardSkuPublicIPAddressesMustBeStatic"},
		{"bad version", netPath("rg", "publicIPAddresses", "x"), `{"location":"eastus","properties":{"publicIPAddressVersion":"IPv5"}}`, 400, "InvalidRequestFormat"},
		{"upgrade of a Dynamic public IP", netPath("rg", "publicIPAddresses", "basic"), `{"location":"eastus","sku":{"name":"Standard"}}`, 400, "DynamicPublicIPAddressCannotBeUpgraded"},
		{"ipv6", netPath("rg", "publicIPAddresses", "v6"), `{"location":"eastus","sku":{"name":"Standard"},"properties":{"publicIPAddressVersion":"IPv6"}}`, 201, ""},
		{"in-use delete", netPath("rg", "publicIPAddresses", "pip"), ``, 400, "PublicIPAddressInUseCannotBeDeleted"},
		{"subnet outside vnet", strings.Replace(netPath("rg", "virtualNetworks", "vnet"), "?", "/subnets/s2?", 1), `{"properties":{"addressPrefix":"192.168.0.0/24"}}`, 400, "NetcfgSubnetRangeOutsideVnet"},
		{"subnet overlap", strings.Replace(netPath("rg", "virtualNetworks", "vnet"), "?", "/subnets/s2?", 1), `{"properties":{"addressPrefix":"10.0.0.128/25"}}`, 400, "NetcfgSubnetRangesOverlap"},
		{"subnet bad cidr", strings.Replace(netPath("rg", "virtualNetworks", "vnet"), "?", "/subnets/s2?", 1), `{"properties":{"addressPrefix":"10.0.1.1/24"}}`, 400, "InvalidCIDRNotation"},
		{"subnet ok", strings.Replace(netPath("rg", "virtualNetworks", "vnet"), "?", "/subnets/s2?", 1), `{"properties":{"addressPrefix":"10.0.1.0/24"}}`, 201, ""},
		{"vnet without address space", netPath("rg", "virtualNetworks", "v2"), `{"location":"eastus"}`, 400, "InvalidAddressSpace"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			method := http.MethodPut
			if tc.body == "" {
				method = http.MethodDelete
			}
			rec := h.do(t, method, tc.path, tc.body, nil)
			if rec.Code != tc.status || errCodeOf(rec) != tc.code {
				t.Fatalf("%d %q, want %d %q: %s", rec.Code, errCodeOf(rec), tc.status, tc.code, rec.Body)
			}
		})
	}
	v6 := h.mustDo(t, 200, http.MethodGet, netPath("rg", "publicIPAddresses", "v6"), "")
	if ip, _ := v6["properties"].(map[string]any)["ipAddress"].(string); !strings.HasPrefix(ip, "2603:1030:40:") {
		t.Fatalf("IPv6 address %q not from the configured range", ip)
	}
	pip := h.mustDo(t, 200, http.MethodGet, netPath("rg", "publicIPAddresses", "pip"), "")
	if ip, _ := pip["properties"].(map[string]any)["ipAddress"].(string); !strings.HasPrefix(ip, "20.40.") {
		t.Fatalf("IPv4 address %q not from the configured range", ip)
	}
}

func TestInternalFrontendGetsPrivateIPAndBlocksSubnetDelete(t *testing.T) {
	h := seedHandler(t)
	subnet := netID("rg", "virtualNetworks", "vnet") + "/subnets/nodes"
	body := `{"location":"eastus","sku":{"name":"Standard"},"properties":{"frontendIPConfigurations":[{"name":"fe","properties":{"subnet":{"id":"` + subnet + `"}}}]}}`
	lb := h.mustDo(t, 201, http.MethodPut, netPath("rg", "loadBalancers", "ilb"), body)
	fe := lb["properties"].(map[string]any)["frontendIPConfigurations"].([]any)[0].(map[string]any)["properties"].(map[string]any)
	if fe["privateIPAddress"] != "10.0.0.4" || fe["privateIPAllocationMethod"] != "Dynamic" || fe["privateIPAddressVersion"] != "IPv4" {
		t.Fatalf("internal frontend: %v", fe)
	}
	// The address is kept across updates.
	lb = h.mustDo(t, 200, http.MethodPut, netPath("rg", "loadBalancers", "ilb"), body)
	if got := lb["properties"].(map[string]any)["frontendIPConfigurations"].([]any)[0].(map[string]any)["properties"].(map[string]any)["privateIPAddress"]; got != "10.0.0.4" {
		t.Fatalf("address changed on update: %v", got)
	}
	rec := h.do(t, http.MethodDelete, strings.Replace(netPath("rg", "virtualNetworks", "vnet"), "?", "/subnets/nodes?", 1), "", nil)
	if rec.Code != 400 || errCodeOf(rec) != "InUseSubnetCannotBeDeleted" {
		t.Fatalf("delete used subnet: %d %s", rec.Code, rec.Body)
	}
	rec = h.do(t, http.MethodDelete, netPath("rg", "virtualNetworks", "vnet"), "", nil)
	if rec.Code != 400 || errCodeOf(rec) != "InUseSubnetCannotBeDeleted" {
		t.Fatalf("delete vnet with used subnet: %d %s", rec.Code, rec.Body)
	}
	static := strings.Replace(body, `"properties":{"subnet"`, `"properties":{"privateIPAllocationMethod":"Static","privateIPAddress":"10.0.0.4","subnet"`, 1)
	rec = h.do(t, http.MethodPut, netPath("rg", "loadBalancers", "ilb2"), static, nil)
	if rec.Code != 400 || errCodeOf(rec) != "PrivateIPAddressInUse" {
		t.Fatalf("static address in use: %d %s", rec.Code, rec.Body)
	}
}

func TestLoadBalancerBackReferencesAndPublicIPLink(t *testing.T) {
	h := seedHandler(t)
	lb := h.mustDo(t, 200, http.MethodGet, netPath("rg", "loadBalancers", "lb"), "")
	props := lb["properties"].(map[string]any)
	etag := lb["etag"]
	for _, key := range []string{"frontendIPConfigurations", "backendAddressPools", "probes"} {
		c := props[key].([]any)[0].(map[string]any)
		if c["etag"] != etag {
			t.Errorf("%s etag %v != LB etag %v", key, c["etag"], etag)
		}
		refs, _ := c["properties"].(map[string]any)["loadBalancingRules"].([]any)
		if len(refs) != 1 || !strings.HasSuffix(refs[0].(map[string]any)["id"].(string), "/loadBalancingRules/rule") {
			t.Errorf("%s back-reference %v", key, refs)
		}
	}
	rule := props["loadBalancingRules"].([]any)[0].(map[string]any)["properties"].(map[string]any)
	if rule["idleTimeoutInMinutes"] == nil || rule["backendAddressPools"] == nil || rule["enableFloatingIP"] != false {
		t.Errorf("rule defaults missing: %v", rule)
	}
	pip := h.mustDo(t, 200, http.MethodGet, netPath("rg", "publicIPAddresses", "pip"), "")
	ipc, _ := pip["properties"].(map[string]any)["ipConfiguration"].(map[string]any)
	if ipc == nil || !strings.HasSuffix(ipc["id"].(string), "/loadBalancers/lb/frontendIPConfigurations/fe") {
		t.Fatalf("pip ipConfiguration %v", ipc)
	}
	// Moving the frontend to pip2 frees pip.
	h.mustDo(t, 200, http.MethodPut, netPath("rg", "loadBalancers", "lb"), lbBody("lb", "pip2", ""))
	pip = h.mustDo(t, 200, http.MethodGet, netPath("rg", "publicIPAddresses", "pip"), "")
	if _, still := pip["properties"].(map[string]any)["ipConfiguration"]; still {
		t.Fatal("pip still linked after the frontend moved")
	}
	h.mustDo(t, 202, http.MethodDelete, netPath("rg", "publicIPAddresses", "pip"), "")
}

// Two Services sharing a frontend cannot take the same port: Azure refuses
// two rules on one frontend with the same protocol and frontend port.
func TestRulesOnOneFrontendNeedDistinctPorts(t *testing.T) {
	if ae := checkRuleFrontendPorts([]any{
		obj{"id": "r1", "properties": obj{"frontendIPConfiguration": obj{"id": "FE"}, "protocol": "Tcp", "frontendPort": 80.0}},
		obj{"id": "r2", "properties": obj{"frontendIPConfiguration": obj{"id": "fe"}, "protocol": "Udp", "frontendPort": 80.0}},
		obj{"id": "r3", "properties": obj{"frontendIPConfiguration": obj{"id": "other"}, "protocol": "Tcp", "frontendPort": 80.0}},
	}); ae != nil {
		t.Fatalf("distinct protocols or frontends refused: %v", ae)
	}
	for name, rules := range map[string][]any{
		"same port": {
			obj{"id": "r1", "properties": obj{"frontendIPConfiguration": obj{"id": "FE"}, "protocol": "Tcp", "frontendPort": 80.0}},
			obj{"id": "r2", "properties": obj{"frontendIPConfiguration": obj{"id": "fe"}, "protocol": "Tcp", "frontendPort": 80.0}},
		},
		"HA ports beside a rule": {
			obj{"id": "r1", "properties": obj{"frontendIPConfiguration": obj{"id": "fe"}, "protocol": "Tcp", "frontendPort": 80.0}},
			obj{"id": "r2", "properties": obj{"frontendIPConfiguration": obj{"id": "fe"}, "protocol": "All", "frontendPort": 0.0}},
		},
	} {
		if ae := checkRuleFrontendPorts(rules); ae == nil || ae.code != "LoadBalancingRulesUseSameFrontendIPConfigurationProtocolAndPort" {
			t.Errorf("%s: %v, want LoadBalancingRulesUseSameFrontendIPConfigurationProtocolAndPort", name, ae)
		}
	}
}

// A pool's drain period needs the subscription feature
// Microsoft.Network/SLBAllowConnectionDraining: refused without it (the
// strictest reading), accepted once registered; 0 needs nothing.
func TestDrainPeriodNeedsTheConnectionDrainingFeature(t *testing.T) {
	h := seedHandler(t)
	pool := strings.Replace(netPath("rg", "loadBalancers", "lb"), "?", "/backendAddressPools/pool?", 1)
	rec := h.do(t, http.MethodPut, pool, `{"properties":{"drainPeriodInSeconds":30}}`, nil)
	if rec.Code != http.StatusBadRequest || errCodeOf(rec) != "SubscriptionNotRegisteredForFeature" || !strings.Contains(rec.Body.String(), FeatureConnectionDraining) {
		t.Fatalf("drain period without the feature: %d %s", rec.Code, rec.Body.String())
	}
	h.mustDo(t, http.StatusOK, http.MethodPut, pool, `{"properties":{"drainPeriodInSeconds":0}}`)
	h.emu.SetFeatures(FeatureConnectionDraining)
	h.mustDo(t, http.StatusOK, http.MethodPut, pool, `{"properties":{"drainPeriodInSeconds":30}}`)
}

// The feature as a subscription registers it (az feature register, then
// az provider register): Registering, Registered at the next read, and in
// effect only once the provider is registered again after that; the
// drain period is refused until then. Another subscription is not
// registered by it; an unknown feature is FeatureNotFound.
func TestRegisteringTheConnectionDrainingFeature(t *testing.T) {
	h := seedHandler(t)
	pool := strings.Replace(netPath("rg", "loadBalancers", "lb"), "?", "/backendAddressPools/pool?", 1)
	feature := "/subscriptions/" + testSub + "/providers/Microsoft.Features/providers/Microsoft.Network/features/SLBAllowConnectionDraining"
	provider := "/subscriptions/" + testSub + "/providers/Microsoft.Network/register?api-version=2021-04-01"
	state := func(m map[string]any) string {
		props, _ := m["properties"].(map[string]any)
		s, _ := props["state"].(string)
		return s
	}
	refused := func(when string) {
		t.Helper()
		if rec := h.do(t, http.MethodPut, pool, `{"properties":{"drainPeriodInSeconds":30}}`, nil); rec.Code != http.StatusBadRequest || errCodeOf(rec) != "SubscriptionNotRegisteredForFeature" {
			t.Fatalf("drain period %s: %d %s, want SubscriptionNotRegisteredForFeature", when, rec.Code, rec.Body)
		}
	}
	if got := state(h.mustDo(t, http.StatusOK, http.MethodGet, feature+"?api-version=2021-07-01", "")); got != "NotRegistered" {
		t.Fatalf("before registering: %q", got)
	}
	// Provider registration before the feature is registered does nothing.
	h.mustDo(t, http.StatusOK, http.MethodPost, provider, "")
	if got := state(h.mustDo(t, http.StatusOK, http.MethodPost, feature+"/register?api-version=2021-07-01", "")); got != "Registering" {
		t.Fatalf("register answered %q, want Registering", got)
	}
	h.mustDo(t, http.StatusOK, http.MethodPost, provider, "") // too early: the feature is not Registered yet
	refused("while the feature is Registering")
	if got := state(h.mustDo(t, http.StatusOK, http.MethodGet, feature+"?api-version=2021-07-01", "")); got != "Registered" {
		t.Fatalf("after registering: %q, want Registered", got)
	}
	refused("before the provider is registered again")
	h.mustDo(t, http.StatusOK, http.MethodPost, provider, "")
	h.mustDo(t, http.StatusOK, http.MethodPut, pool, `{"properties":{"drainPeriodInSeconds":30}}`)

	other := "/subscriptions/00000000-0000-0000-0000-0000000000aa/providers/Microsoft.Features/providers/Microsoft.Network/features/SLBAllowConnectionDraining?api-version=2021-07-01"
	if got := state(h.mustDo(t, http.StatusOK, http.MethodGet, other, "")); got != "NotRegistered" {
		t.Errorf("another subscription: %q, want NotRegistered", got)
	}
	unknown := "/subscriptions/" + testSub + "/providers/Microsoft.Features/providers/Microsoft.Network/features/NoSuchFeature/register?api-version=2021-07-01"
	if rec := h.do(t, http.MethodPost, unknown, "", nil); rec.Code != http.StatusNotFound || errCodeOf(rec) != "FeatureNotFound" {
		t.Errorf("an unknown feature: %d %s, want 404 FeatureNotFound", rec.Code, rec.Body)
	}
	if rec := h.do(t, http.MethodPost, feature+"/register?api-version=2020-01-01", "", nil); rec.Code != http.StatusBadRequest {
		t.Errorf("an unknown api-version: %d %s, want 400", rec.Code, rec.Body)
	}
}
