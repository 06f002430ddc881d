package emulator

import (
	"net/http"
	"slices"
	"strings"
	"testing"
)

// The emulator tells which regions have availability zones the way ARM
// does (the Microsoft.Compute provider's zone mappings), and holds public
// IPs and frontends to them (issue 26).
func TestProviderZoneMappings(t *testing.T) {
	h := newHandlerEnv(t, Options{})
	m := h.mustDo(t, http.StatusOK, http.MethodGet, "/subscriptions/"+testSub+"/providers/Microsoft.Compute?api-version=2021-04-01", "")
	if m["namespace"] != "Microsoft.Compute" {
		t.Fatalf("namespace = %v", m["namespace"])
	}
	zoned := map[string][]any{}
	for _, rt := range m["resourceTypes"].([]any) {
		rt := rt.(map[string]any)
		if rt["resourceType"] != "virtualMachines" {
			continue
		}
		for _, zm := range rt["zoneMappings"].([]any) {
			zm := zm.(map[string]any)
			zoned[normLocation(zm["location"].(string))] = zm["zones"].([]any)
		}
	}
	if z := zoned["eastus"]; len(z) != 3 {
		t.Errorf("eastus zones = %v, want 1, 2, 3", z)
	}
	if _, ok := zoned["westus"]; ok {
		t.Error("westus has zones; it has none")
	}
	if rec := h.do(t, http.MethodGet, "/subscriptions/"+testSub+"/providers/Microsoft.Compute?api-version=2025-05-01", "", nil); rec.Code != http.StatusBadRequest {
		t.Errorf("unknown api-version: %d", rec.Code)
	}
}

func TestPublicIPZones(t *testing.T) {
	h := newHandlerEnv(t, Options{})
	h.mustDo(t, http.StatusCreated, http.MethodPut, rgPath("rg"), `{"location":"eastus"}`)
	std := `"sku":{"name":"Standard"},"properties":{"publicIPAllocationMethod":"Static"}`
	m := h.mustDo(t, http.StatusCreated, http.MethodPut, netPath("rg", "publicIPAddresses", "zr"), `{"location":"eastus","zones":["1","2","3"],`+std+`}`)
	if z, _ := m["zones"].([]any); len(z) != 3 {
		t.Fatalf("zones = %v", m["zones"])
	}
	for name, tc := range map[string]struct{ body, code string }{
		"region-without-zones": {`{"location":"westus","zones":["1"],` + std + `}`, "LocationNotSupportAvailabilityZones"},
		"unknown-zone":         {`{"location":"eastus","zones":["4"],` + std + `}`, "InvalidAvailabilityZone"},
	} {
		rec := h.do(t, http.MethodPut, netPath("rg", "publicIPAddresses", name), tc.body, nil)
		if rec.Code != http.StatusBadRequest || errCodeOf(rec) != tc.code {
			t.Errorf("%s: %d %s, want 400 %s", name, rec.Code, rec.Body, tc.code)
		}
	}
	// Zones stay as created: an update without them is refused.
	rec := h.do(t, http.MethodPut, netPath("rg", "publicIPAddresses", "zr"), `{"location":"eastus",`+std+`}`, nil)
	if rec.Code != http.StatusBadRequest || errCodeOf(rec) != "ResourceAvailabilityZonesCannotBeModified" || !strings.Contains(rec.Body.String(), "NoZone") {
		t.Fatalf("zones removed: %d %s", rec.Code, rec.Body)
	}
	h.mustDo(t, http.StatusOK, http.MethodPut, netPath("rg", "publicIPAddresses", "zr"), `{"location":"eastus","zones":["3","2","1"],"tags":{"a":"b"},`+std+`}`)
}

// A public IP takes its address from its prefix; a full prefix is an error
// with Azure's code.
func TestPublicIPFromPrefixExhausted(t *testing.T) {
	h := newHandlerEnv(t, Options{})
	h.mustDo(t, http.StatusCreated, http.MethodPut, rgPath("rg"), `{"location":"eastus"}`)
	p := h.mustDo(t, http.StatusCreated, http.MethodPut, netPath("rg", "publicIPPrefixes", "pfx"), `{"location":"eastus","sku":{"name":"Standard"},"properties":{"prefixLength":31}}`)
	got := h.mustDo(t, http.StatusOK, http.MethodGet, netPath("rg", "publicIPPrefixes", "pfx"), "")
	block := got["properties"].(map[string]any)["ipPrefix"].(string)
	body := `{"location":"eastus","sku":{"name":"Standard"},"properties":{"publicIPAllocationMethod":"Static","publicIPPrefix":{"id":"` + p["id"].(string) + `"}}}`
	var addrs []string
	for _, name := range []string{"a", "b"} {
		h.mustDo(t, http.StatusCreated, http.MethodPut, netPath("rg", "publicIPAddresses", name), body)
		pip := h.mustDo(t, http.StatusOK, http.MethodGet, netPath("rg", "publicIPAddresses", name), "")
		addrs = append(addrs, pip["properties"].(map[string]any)["ipAddress"].(string))
	}
	for _, a := range addrs {
		if !strings.HasPrefix(block, strings.TrimSuffix(a, a[strings.LastIndexByte(a, '.')+1:])) {
			t.Errorf("address %s outside prefix %s", a, block)
		}
	}
	if slices.Compact(slices.Sorted(slices.Values(addrs)))[0] == "" || addrs[0] == addrs[1] {
		t.Fatalf("addresses %v", addrs)
	}
	rec := h.do(t, http.MethodPut, netPath("rg", "publicIPAddresses", "c"), body, nil)
	if rec.Code != http.StatusBadRequest || errCodeOf(rec) != "PublicIpPrefixOutOfIpAddresses" || !strings.Contains(rec.Body.String(), "pfx") {
		t.Fatalf("third address from a /31: %d %s, want 400 PublicIpPrefixOutOfIpAddresses naming the prefix", rec.Code, rec.Body)
	}
}

// An internal frontend's zones are checked like a public IP's and stay as
// created.
func TestFrontendZones(t *testing.T) {
	h := newHandlerEnv(t, Options{})
	h.mustDo(t, http.StatusCreated, http.MethodPut, rgPath("rg"), `{"location":"eastus"}`)
	h.mustDo(t, http.StatusCreated, http.MethodPut, netPath("rg", "virtualNetworks", "vnet"),
		`{"location":"eastus","properties":{"addressSpace":{"addressPrefixes":["10.0.0.0/16"]},"subnets":[{"name":"s","properties":{"addressPrefix":"10.0.0.0/24"}}]}}`)
	subnet := netID("rg", "virtualNetworks", "vnet") + "/subnets/s"
	lb := func(zones string) string {
		return `{"location":"eastus","sku":{"name":"Standard"},"properties":{"frontendIPConfigurations":[{"name":"fe",` + zones +
			`"properties":{"subnet":{"id":"` + subnet + `"}}}]}}`
	}
	h.mustDo(t, http.StatusCreated, http.MethodPut, netPath("rg", "loadBalancers", "ilb"), lb(`"zones":["1","2","3"],`))
	if rec := h.do(t, http.MethodPut, netPath("rg", "loadBalancers", "ilb"), lb(""), nil); rec.Code != http.StatusBadRequest || errCodeOf(rec) != "ResourceAvailabilityZonesCannotBeModified" {
		t.Fatalf("frontend zones removed: %d %s", rec.Code, rec.Body)
	}
	if rec := h.do(t, http.MethodPut, netPath("rg", "loadBalancers", "ilb2"), lb(`"zones":["7"],`), nil); rec.Code != http.StatusBadRequest || errCodeOf(rec) != "InvalidAvailabilityZone" {
		t.Fatalf("frontend in zone 7: %d %s", rec.Code, rec.Body)
	}
	h.mustDo(t, http.StatusOK, http.MethodPut, netPath("rg", "loadBalancers", "ilb"), lb(`"zones":["1","2","3"],`))
}
