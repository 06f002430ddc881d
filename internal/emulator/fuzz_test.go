package emulator

import (
	"encoding/json"
	"net/http"
	"net/netip"
	"strconv"
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
	f.Add("networkSecurityGroups", `{"location":"eastus","properties":{"securityRules":[{"name":"r","properties":{"priority":100,"direction":"Inbound","access":"Allow","protocol":"Tcp","sourceAddressPrefixes":["10.0.0.0/8"],"sourcePortRange":"*","destinationAddressPrefix":"VirtualNetwork","destinationPortRanges":["80","443-444"]}}]}}`)
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

// FuzzSecurityRulePUT: arbitrary securityRules PUTs never cause a 5xx,
// leave the group readable, and what is accepted compiles for the data
// plane with every port range and prefix it holds.
func FuzzSecurityRulePUT(f *testing.F) {
	f.Add(`{"properties":{"priority":100,"direction":"Inbound","access":"Allow","protocol":"Tcp","sourceAddressPrefix":"Internet","sourcePortRange":"*","destinationAddressPrefix":"10.0.0.0/24","destinationPortRange":"80-81"}}`)
	f.Add(`{"properties":{"priority":"4096","direction":"Outbound","access":"Deny","protocol":"*","sourceAddressPrefixes":["10.0.0.4","fd00::/64"],"sourcePortRanges":["1","2-3"],"destinationAddressPrefix":"*","destinationPortRange":"*"}}`)
	f.Add(`{"properties":{"priority":100,"direction":"Inbound","access":"Allow","protocol":"Udp","sourceAddressPrefixes":["*"],"sourcePortRange":"80,81","destinationAddressPrefix":"AzureFrontDoor.Backend","destinationPortRange":"65536"}}`)
	f.Add(`{"properties":{"description":7,"sourceApplicationSecurityGroups":[{"id":""}],"destinationPortRanges":"x"}}`)
	h := seedHandler(f)
	h.mustDo(f, 201, http.MethodPut, netPath("rg", "networkSecurityGroups", "nsg"), `{"location":"eastus"}`)
	path := strings.Replace(netPath("rg", "networkSecurityGroups", "nsg"), "?", "/securityRules/fz?", 1)
	f.Fuzz(func(t *testing.T, body string) {
		rec := h.do(t, http.MethodPut, path, body, nil)
		checkNoServerError(t, http.MethodGet, netPath("rg", "networkSecurityGroups", "nsg"), "", h)
		if rec.Code/100 != 2 {
			return
		}
		h.emu.mu.RLock()
		ix := h.emu.securityIndex(h.emu.clock.Now())
		g := ix.group(netID("rg", "networkSecurityGroups", "nsg"))
		h.emu.mu.RUnlock()
		for _, r := range g.Rules {
			if r.Name == "fz" && (len(r.SourcePorts) == 0 || len(r.DestinationPorts) == 0) {
				t.Fatalf("accepted rule %s compiled without ports: %+v", body, r)
			}
		}
	})
}

// FuzzPortRange: parsePortRange accepts exactly "*", "N" and "A-B" in
// canonical decimal with 0 <= A <= B <= 65535.
func FuzzPortRange(f *testing.F) {
	for _, s := range []string{"*", "0", "80", "65535", "65536", "1-2", "2-1", "080", "-", "1-", " 1", "1,2", "+1", "99999999999999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, ok := parsePortRange(s)
		if !ok {
			return
		}
		if r.From > r.To {
			t.Fatalf("%q: %d > %d", s, r.From, r.To)
		}
		want := strconv.Itoa(int(r.From))
		if r.From != r.To || strings.Contains(s, "-") {
			want += "-" + strconv.Itoa(int(r.To))
		}
		if s != "*" && s != want {
			t.Fatalf("%q accepted as %v (canonically %q)", s, r, want)
		}
	})
}

// FuzzNSGPrefix: an accepted address prefix is canonical (no host bits,
// no zone, no IPv4-mapped form), and an IPv4 one prints back as given.
func FuzzNSGPrefix(f *testing.F) {
	for _, s := range []string{"10.0.0.0/8", "10.0.0.1", "10.0.0.1/8", "fd00::/64", "::ffff:1.2.3.4", "fe80::1%eth0", "1.2.3.4/33", "Internet"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, ok := parseNSGPrefix(s)
		if !ok {
			return
		}
		if p != p.Masked() || p.Addr().Zone() != "" || p.Addr().Is4In6() {
			t.Fatalf("%q accepted as %v", s, p)
		}
		// IPv4 in its one canonical text; IPv6 in any of its forms.
		if p.Addr().Is4() && s != p.String() && s != p.Addr().String() {
			t.Fatalf("%q accepted as %v", s, p)
		}
	})
}

// FuzzSubtractPrefixes: an address is in base minus remove exactly when it
// is in base and in no prefix of remove, and the result's prefixes are
// disjoint.
func FuzzSubtractPrefixes(f *testing.F) {
	f.Add([]byte{127, 0, 0, 0, 8}, []byte{127, 240, 0, 0, 12, 127, 0, 0, 1, 32}, []byte{127, 241, 3, 4})
	f.Add([]byte{10, 0, 0, 0, 30}, []byte{10, 0, 0, 1, 32}, []byte{10, 0, 0, 2})
	prefixes := func(b []byte) []netip.Prefix {
		var out []netip.Prefix
		for ; len(b) >= 5 && len(out) < 8; b = b[5:] {
			out = append(out, netip.PrefixFrom(netip.AddrFrom4([4]byte(b[:4])), int(b[4])%33).Masked())
		}
		return out
	}
	in := func(ps []netip.Prefix, a netip.Addr) int {
		n := 0
		for _, p := range ps {
			if p.Contains(a) {
				n++
			}
		}
		return n
	}
	f.Fuzz(func(t *testing.T, base, remove, addr []byte) {
		if len(addr) < 4 {
			return
		}
		b, r := prefixes(base), prefixes(remove)
		got := subtractPrefixes(b, r)
		a := netip.AddrFrom4([4]byte(addr[:4]))
		want := in(b, a) > 0 && in(r, a) == 0
		if n := in(got, a); (n > 0) != want || n > 1 && len(b) == 1 {
			t.Fatalf("%v - %v = %v: %s is in %d result prefixes, want in: %v", b, r, got, a, n, want)
		}
	})
}
