package emulator

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// checkNoServerError asserts the invariants every ARM answer to arbitrary
// input must keep: no 5xx, and a JSON body when there is one.
func checkNoServerError(t *testing.T, method, path, body string, h *handlerEnv) {
	t.Helper()
	rec := h.do(t, method, path, body, nil)
	if rec.Code >= 500 || rec.Code < 200 {
		t.Fatalf("%s %s with %q: status %d: %s", method, path, body, rec.Code, rec.Body)
	}
	if rec.Body.Len() > 0 && !json.Valid(rec.Body.Bytes()) {
		t.Fatalf("%s %s with %q: body is not JSON: %s", method, path, body, rec.Body)
	}
	if rec.Code >= 400 && errCodeOf(rec) == "" {
		t.Fatalf("%s %s with %q: %d without an ARM error code: %s", method, path, body, rec.Code, rec.Body)
	}
}

func FuzzLoadBalancerPUT(f *testing.F) {
	f.Add(lbBody("lb2", "pip2", ""))
	f.Add(lbBody("lb2", "pip", ""))
	f.Add(`{"location":"eastus","properties":{"frontendIPConfigurations":[{"name":"fe","properties":{"subnet":{"id":"` + netID("rg", "virtualNetworks", "vnet") + `/subnets/nodes"}}}]}}`)
	f.Add(`{"location":"eastus","properties":{"frontendIPConfigurations":null,"backendAddressPools":[{"name":"p","properties":{"loadBalancerBackendAddresses":[{"properties":{"ipAddress":"::1"}}]}}]}}`)
	f.Add(`{"location":1,"sku":[],"properties":{"probes":[{"name":"x","properties":{"port":"1e9"}}]}}`)
	f.Add(`null`)
	f.Add(`{"properties":{"loadBalancingRules":[{"name":"r","properties":{"frontendIPConfiguration":{"id":7}}}]},"location":"eastus"}`)
	h := seedHandler(f)
	f.Fuzz(func(t *testing.T, body string) {
		checkNoServerError(t, http.MethodPut, netPath("rg", "loadBalancers", "lb2"), body, h)
		checkNoServerError(t, http.MethodGet, netPath("rg", "loadBalancers", "lb2"), "", h)
	})
}

func FuzzBackendPoolPUT(f *testing.F) {
	vnet := netID("rg", "virtualNetworks", "vnet")
	f.Add(`{"properties":{"loadBalancerBackendAddresses":[{"name":"a","properties":{"ipAddress":"10.0.0.4","virtualNetwork":{"id":"` + vnet + `"},"adminState":"Down"}}]}}`)
	f.Add(`{"name":"pool","properties":{"loadBalancerBackendAddresses":[{"properties":{"ipAddress":"10.0.0.4","subnet":{"id":"` + vnet + `/subnets/nodes"}}}]}}`)
	f.Add(`{"properties":{"loadBalancerBackendAddresses":[{"name":1}],"virtualNetwork":{"id":""}}}`)
	f.Add(`{"properties":{"drainPeriodInSeconds":"x","syncMode":"Sometimes"}}`)
	f.Add(`{"properties":{"loadBalancerBackendAddresses":[null,[],"x"]}}`)
	h := seedHandler(f)
	path := strings.Replace(netPath("rg", "loadBalancers", "lb"), "?", "/backendAddressPools/pool?", 1)
	f.Fuzz(func(t *testing.T, body string) {
		checkNoServerError(t, http.MethodPut, path, body, h)
		checkNoServerError(t, http.MethodGet, path, "", h)
		checkNoServerError(t, http.MethodGet, netPath("rg", "loadBalancers", "lb"), "", h)
	})
}

func FuzzPublicIPPUT(f *testing.F) {
	f.Add(`{"location":"eastus","sku":{"name":"Standard","tier":"Regional"},"properties":{"publicIPAddressVersion":"IPv6"}}`)
	f.Add(`{"location":"eastus","properties":{"dnsSettings":{"domainNameLabel":"x"},"publicIPPrefix":{"id":"/x"}}}`)
	f.Add(`{"location":"eastus","properties":{"idleTimeoutInMinutes":"abc","ipTags":{}}}`)
	h := seedHandler(f)
	f.Fuzz(func(t *testing.T, body string) {
		checkNoServerError(t, http.MethodPut, netPath("rg", "publicIPAddresses", "fz"), body, h)
		checkNoServerError(t, http.MethodGet, netPath("rg", "publicIPAddresses", "fz"), "", h)
	})
}

func FuzzNetworkPUT(f *testing.F) {
	f.Add("virtualNetworks", `{"location":"eastus","properties":{"addressSpace":{"addressPrefixes":["10.1.0.0/16"]},"subnets":[{"name":"s","properties":{"addressPrefixes":["10.1.0.0/24","fd00::/64"]}}]}}`)
	f.Add("networkSecurityGroups", `{"location":"eastus","properties":{"securityRules":[{"name":"r","properties":{"priority":100,"direction":"Inbound","access":"Allow","protocol":"Tcp"}}]}}`)
	f.Add("natGateways", `{"location":"eastus","properties":{"publicIpAddresses":[{"id":"`+netID("rg", "publicIPAddresses", "pip2")+`"}]}}`)
	f.Add("publicIPPrefixes", `{"location":"eastus","properties":{"prefixLength":30}}`)
	f.Add("networkInterfaces", `{"location":"eastus","properties":{"ipConfigurations":[{"name":"c","properties":{"subnet":{"id":"`+netID("rg", "virtualNetworks", "vnet")+`/subnets/nodes"}}}]}}`)
	h := seedHandler(f)
	f.Fuzz(func(t *testing.T, typ, body string) {
		if strings.ContainsAny(typ, "/?#%") || typ == "" {
			return
		}
		checkNoServerError(t, http.MethodPut, netPath("rg", typ, "fz"), body, h)
		checkNoServerError(t, http.MethodGet, netPath("rg", typ, "fz"), "", h)
		checkNoServerError(t, http.MethodDelete, netPath("rg", typ, "fz"), "", h)
	})
}

func FuzzARMPath(f *testing.F) {
	f.Add("/subscriptions/" + testSub + "/resourceGroups/rg/providers/Microsoft.Network/loadBalancers/lb/backendAddressPools/p")
	f.Add("/subscriptions/" + testSub + "/providers/Microsoft.Network/locations/eastus/operations/x")
	f.Add("/subscriptions/" + testSub + "/operationresults/eyJ4Ijoi")
	f.Add("/subscriptions//resourcegroups")
	f.Add("/subscriptions/" + testSub + "/resourceGroups/rg/providers/Microsoft.Compute/virtualMachineScaleSets/ss/virtualMachines/0/networkInterfaces/nic/ipConfigurations/c")
	f.Add("/subscriptions/" + testSub + "/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/vm/deallocate")
	h := seedHandler(f)
	f.Fuzz(func(t *testing.T, p string) {
		if !strings.HasPrefix(p, "/") || strings.ContainsAny(p, "?# \t\r\n%") {
			return
		}
		for _, v := range []string{NetworkAPIVersion, ResourcesAPIVersion, ComputeAPIVersion, VMSSNICAPIVersion} {
			checkNoServerError(t, http.MethodGet, p+"?api-version="+v, "", h)
			checkNoServerError(t, http.MethodPut, p+"?api-version="+v, `{"location":"eastus"}`, h)
			checkNoServerError(t, http.MethodDelete, p+"?api-version="+v, "", h)
			checkNoServerError(t, http.MethodPost, p+"?api-version="+v, "", h)
		}
	})
}

func FuzzControlFault(f *testing.F) {
	f.Add(`{"status":429,"retryAfter":"3","latency":"5ms","count":1}`)
	f.Add(`{"pathRegex":"[","latency":-1}`)
	f.Add(`{"lroResult":"Failed","method":"PUT"}`)
	e := New(Options{})
	f.Fuzz(func(t *testing.T, body string) {
		rec := control(e, http.MethodPost, "/_emulator/faults", body)
		if rec.Code != 201 && rec.Code != 400 {
			t.Fatalf("status %d: %s", rec.Code, rec.Body)
		}
		e.ClearFaults()
	})
}

// FuzzParseJSON: parseJSON accepts exactly the valid JSON values (numbers
// of any size, as json.Number; trailing whitespace only), never panics, and
// what it parses appendJSON encodes as encoding/json does.
func FuzzParseJSON(f *testing.F) {
	for _, s := range []string{`{"a":[1,-2.5e+3,true,false,null,"x\u00e9\ud83d\ude00\n\"/"]}`, `"\ud800x"`, "\"\xff\xfe\"", `[]`, ` 12 `, `{"a":1,"a":2}`, `[1,]`, `{"a" 1}`, `01`, `-`, `1.`, `1e`, `"\u12"`, "\"\t\"", `tru`, `{} {}`, "0A00000", "1" + strings.Repeat("0", 400)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, doc string) {
		valid := json.Valid([]byte(doc))
		got, gerr := parseJSON([]byte(doc))
		if valid != (gerr == nil) {
			t.Fatalf("%q: json.Valid=%v, parseJSON err=%v", doc, valid, gerr)
		}
		if gerr == nil {
			b, err := appendJSON(nil, got)
			if err != nil {
				t.Fatalf("%q: a parsed value does not encode: %v", doc, err)
			}
			if want, _ := json.Marshal(got); string(b) != string(want) {
				t.Fatalf("%q: appendJSON = %s; encoding/json = %s", doc, b, want)
			}
		}
	})
}

func computePath(rg, rest string) string {
	return "/subscriptions/" + testSub + "/resourceGroups/" + rg + "/providers/Microsoft.Compute/" + rest + "?api-version=" + ComputeAPIVersion
}

// FuzzComputePUT: arbitrary bodies PUT to a scale set (new and existing),
// a scale set VM, a VM and an availability set never cause a 5xx or a
// non-JSON answer, and leave the resources, the NICs and the pool they may
// reference readable.
func FuzzComputePUT(f *testing.F) {
	pool := netID("rg", "loadBalancers", "lb") + "/backendAddressPools/pool"
	subnet := netID("rg", "virtualNetworks", "vnet") + "/subnets/nodes"
	nicCfg := `"networkProfile":{"networkInterfaceConfigurations":[{"name":"nic","properties":{"primary":true,"ipConfigurations":[{"name":"ipconfig1","properties":{"subnet":{"id":"` + subnet + `"},"loadBalancerBackendAddressPools":[{"id":"` + pool + `"}]}}]}}]}`
	vmss := `{"location":"eastus","sku":{"name":"Standard_D2s_v3","capacity":2},"properties":{"upgradePolicy":{"mode":"Manual"},"virtualMachineProfile":{"osProfile":{"computerNamePrefix":"ss"},` + nicCfg + `}}}`
	f.Add(uint8(0), vmss)
	f.Add(uint8(1), vmss)
	f.Add(uint8(1), `{"location":"eastus","sku":{"capacity":-1},"properties":{"orchestrationMode":"Flexible"}}`)
	f.Add(uint8(2), `{"location":"eastus","properties":{`+nicCfg+`}}`)
	f.Add(uint8(2), `{"properties":{"networkProfileConfiguration":{"networkInterfaceConfigurations":[{"name":"nic","properties":{"ipConfigurations":[{"name":"ipconfig1","properties":{"loadBalancerBackendAddressPools":[{"id":7}]}}]}}]}}}`)
	f.Add(uint8(3), `{"location":"eastus","properties":{"availabilitySet":{"id":"x"},"networkProfile":{"networkInterfaces":[{"id":"`+netID("rg", "networkInterfaces", "nope")+`"}]}}}`)
	f.Add(uint8(4), `{"location":"eastus","sku":{"name":"Aligned"},"properties":{"platformFaultDomainCount":"2"}}`)
	f.Add(uint8(0), `null`)
	h := seedHandler(f)
	h.mustDo(f, 201, http.MethodPut, computePath("rg", "virtualMachineScaleSets/ss"), strings.Replace(vmss, `,"loadBalancerBackendAddressPools":[{"id":"`+pool+`"}]`, "", 1))
	paths := []string{"virtualMachineScaleSets/fz", "virtualMachineScaleSets/ss", "virtualMachineScaleSets/ss/virtualMachines/0",
		"virtualMachines/fz", "availabilitySets/fz"}
	f.Fuzz(func(t *testing.T, which uint8, body string) {
		p := computePath("rg", paths[int(which)%len(paths)])
		checkNoServerError(t, http.MethodPut, p, body, h)
		checkNoServerError(t, http.MethodGet, p, "", h)
		checkNoServerError(t, http.MethodGet, computePath("rg", "virtualMachineScaleSets/ss/virtualMachines"), "", h)
		checkNoServerError(t, http.MethodGet, netPath("rg", "networkInterfaces", ""), "", h)
		checkNoServerError(t, http.MethodGet, strings.Replace(netPath("rg", "loadBalancers", "lb"), "?", "/backendAddressPools/pool?", 1), "", h)
	})
}
