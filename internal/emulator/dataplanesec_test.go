package emulator

import (
	"fmt"
	"net/http"
	"net/netip"
	"strings"
	"testing"

	"github.com/azlb/azlb/internal/emulator/dataplane"
)

// secState seeds a virtual network 10.0.0.0/16 with subnets a (NSG
// nsg-subnet), b (none) and c (nsg-subnet); NICs in b and c with NSG
// nsg-nic, one in b without; and a Standard load balancer whose pool has
// a member in each situation.
func secState(t *testing.T, o Options) (*handlerEnv, map[string]dataplane.Member) {
	t.Helper()
	h := newHandlerEnv(t, o)
	h.mustDo(t, 201, http.MethodPut, rgPath("rg"), `{"location":"eastus"}`)
	subnetNSG, nicNSG := netID("rg", "networkSecurityGroups", "nsg-subnet"), netID("rg", "networkSecurityGroups", "nsg-nic")
	h.mustDo(t, 201, http.MethodPut, netPath("rg", "networkSecurityGroups", "nsg-subnet"), nsgBody(
		secRule("deny-frontdoor", map[string]any{"priority": 100, "access": "Deny", "protocol": "*", "sourceAddressPrefix": "AzureFrontDoor.Backend", "destinationPortRange": "*"}),
		secRule("deny-storage", map[string]any{"priority": 120, "access": "Deny", "protocol": "*", "sourceAddressPrefix": "Storage", "destinationPortRange": "*"}),
		secRule("allow-ssh-one", map[string]any{"priority": 150, "sourceAddressPrefix": "203.0.113.7", "destinationPortRange": "22"}),
		secRule("deny-ssh-range", map[string]any{"priority": 160, "access": "Deny", "sourceAddressPrefix": "203.0.113.0/24", "destinationPortRange": "22"}),
		secRule("allow-web", map[string]any{"priority": 200, "sourceAddressPrefix": "Internet", "destinationAddressPrefix": nil,
			"destinationAddressPrefixes": []string{"10.0.1.0/24", "10.0.3.0/24"}, "destinationPortRange": nil, "destinationPortRanges": []string{"80", "8080-8081"}}),
		secRule("deny-udp", map[string]any{"priority": 400, "access": "Deny", "protocol": "Udp", "destinationPortRange": "*"}),
		secRule("outbound", map[string]any{"priority": 100, "direction": "Outbound", "access": "Allow", "protocol": "*", "destinationPortRange": "*"}),
	))
	h.mustDo(t, 201, http.MethodPut, netPath("rg", "networkSecurityGroups", "nsg-nic"), nsgBody(
		secRule("deny-internet-web", map[string]any{"priority": 100, "access": "Deny", "sourceAddressPrefix": "INTERNET"}),
	))
	h.mustDo(t, 201, http.MethodPut, netPath("rg", "virtualNetworks", "vnet"), fmt.Sprintf(`{"location":"eastus","properties":{
		"addressSpace":{"addressPrefixes":["10.0.0.0/16"]},"subnets":[
		{"name":"a","properties":{"addressPrefix":"10.0.1.0/24","networkSecurityGroup":{"id":%q}}},
		{"name":"b","properties":{"addressPrefix":"10.0.2.0/24"}},
		{"name":"c","properties":{"addressPrefix":"10.0.3.0/24","networkSecurityGroup":{"id":%q}}}]}}`, subnetNSG, subnetNSG))
	vnet := netID("rg", "virtualNetworks", "vnet")
	for _, n := range []struct{ name, subnet, ip, nsg string }{
		{"nic-b", "b", "10.0.2.10", nicNSG}, {"nic-c", "c", "10.0.3.10", nicNSG}, {"nic-plain", "b", "10.0.2.11", ""},
	} {
		nsg := ""
		if n.nsg != "" {
			nsg = fmt.Sprintf(`,"networkSecurityGroup":{"id":%q}`, n.nsg)
		}
		h.mustDo(t, 201, http.MethodPut, netPath("rg", "networkInterfaces", n.name), fmt.Sprintf(`{"location":"eastus","properties":{
			"ipConfigurations":[{"name":"ipconfig","properties":{"subnet":{"id":%q},"privateIPAddress":%q,"privateIPAllocationMethod":"Static"}}]%s}}`,
			vnet+"/subnets/"+n.subnet, n.ip, nsg))
	}
	h.mustDo(t, 201, http.MethodPut, netPath("rg", "publicIPAddresses", "pip"), `{"location":"eastus","sku":{"name":"Standard"}}`)
	var addrs []string
	for name, ip := range map[string]string{"m-a": "10.0.1.10", "m-b": "10.0.2.10", "m-c": "10.0.3.10", "m-none": "10.0.2.20", "m-plain": "10.0.2.11"} {
		addrs = append(addrs, fmt.Sprintf(`{"name":%q,"properties":{"ipAddress":%q,"virtualNetwork":{"id":%q}}}`, name, ip, vnet))
	}
	h.mustDo(t, 201, http.MethodPut, netPath("rg", "loadBalancers", "lb"), lbBody("lb", "pip", ""))
	h.mustDo(t, 200, http.MethodPut, strings.Replace(netPath("rg", "loadBalancers", "lb"), "?", "/backendAddressPools/pool?", 1),
		`{"properties":{"loadBalancerBackendAddresses":[`+strings.Join(addrs, ",")+`]}}`)
	cfg, _ := h.emu.dataPlaneConfig()
	if len(cfg.Rules) != 1 {
		t.Fatalf("config %+v", cfg)
	}
	members := map[string]dataplane.Member{}
	for _, m := range cfg.Rules[0].Members {
		members[m.Name] = m
	}
	return h, members
}

func TestDataPlaneSecurityFromState(t *testing.T) {
	o := Options{
		InternetPrefixes: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("203.0.113.0/24")},
		ServiceTags:      map[string][]netip.Prefix{"AzureFrontDoor.Backend": {netip.MustParsePrefix("198.51.100.0/24")}},
	}
	_, members := secState(t, o)
	subnetNSG, nicNSG := netID("rg", "networkSecurityGroups", "nsg-subnet"), netID("rg", "networkSecurityGroups", "nsg-nic")
	groupID := func(g *dataplane.SecurityGroup) string {
		if g == nil {
			return ""
		}
		return g.ID
	}
	for name, want := range map[string][2]string{
		"m-a": {subnetNSG, ""}, "m-b": {"", nicNSG}, "m-c": {subnetNSG, nicNSG},
	} {
		sec := members[name].Security
		if sec == nil || groupID(sec.Subnet) != want[0] || groupID(sec.NIC) != want[1] || sec.Open {
			t.Errorf("%s: security %+v, want subnet %q NIC %q", name, sec, want[0], want[1])
		}
	}
	for _, name := range []string{"m-none", "m-plain"} {
		if sec := members[name].Security; sec != nil {
			t.Errorf("%s (no NSG, Standard): security %+v, want nil", name, sec)
		}
	}
	if g := members["m-a"].Security.Subnet; len(g.Rules) != 6+3 {
		t.Errorf("nsg-subnet compiled to %d inbound rules, want 6 custom and 3 default", len(g.Rules))
	}

	ap := netip.MustParseAddrPort
	cases := []struct {
		member   string
		proto    dataplane.Protocol
		src, dst string
		allowed  bool
		nsg      string
		rule     string
	}{
		{"m-a", dataplane.ProtocolTCP, "127.0.0.1:40000", "10.0.1.10:80", true, subnetNSG, "allow-web"},
		{"m-a", dataplane.ProtocolTCP, "127.0.0.1:40000", "10.0.1.10:8081", true, subnetNSG, "allow-web"},
		{"m-a", dataplane.ProtocolTCP, "127.0.0.1:40000", "10.0.1.10:8082", false, subnetNSG, "DenyAllInBound"},
		{"m-a", dataplane.ProtocolTCP, "10.1.0.5:40000", "10.0.1.10:80", true, subnetNSG, "allow-web"},          // Internet: 10/8 outside the vnet
		{"m-a", dataplane.ProtocolTCP, "10.0.5.5:40000", "10.0.1.10:8082", true, subnetNSG, "AllowVnetInBound"}, // VirtualNetwork, not Internet
		{"m-a", dataplane.ProtocolTCP, "10.0.5.5:40000", "10.0.1.10:80", true, subnetNSG, "AllowVnetInBound"},
		{"m-a", dataplane.ProtocolTCP, "198.51.100.9:40000", "10.0.1.10:80", false, subnetNSG, "deny-frontdoor"},
		{"m-a", dataplane.ProtocolTCP, "203.0.113.7:40000", "10.0.1.10:22", true, subnetNSG, "allow-ssh-one"},
		{"m-a", dataplane.ProtocolTCP, "203.0.113.8:40000", "10.0.1.10:22", false, subnetNSG, "deny-ssh-range"},
		{"m-a", dataplane.ProtocolUDP, "127.0.0.1:40000", "10.0.1.10:80", false, subnetNSG, "deny-udp"},
		{"m-a", dataplane.ProtocolTCP, dataplane.ProbeSource.String(), "10.0.1.10:8082", true, subnetNSG, "AllowVnetInBound"},
		{"m-a", dataplane.ProtocolTCP, "127.0.0.1:40000", "20.40.0.4:80", false, subnetNSG, "DenyAllInBound"}, // floating IP: the frontend
		{"m-b", dataplane.ProtocolTCP, "127.0.0.1:40000", "10.0.2.10:80", false, nicNSG, "deny-internet-web"},
		{"m-b", dataplane.ProtocolTCP, "10.0.5.5:40000", "10.0.2.10:80", true, nicNSG, "AllowVnetInBound"},
		{"m-b", dataplane.ProtocolTCP, dataplane.ProbeSource.String(), "10.0.2.10:80", true, nicNSG, "AllowVnetInBound"},
		{"m-c", dataplane.ProtocolTCP, "127.0.0.1:40000", "10.0.3.10:80", false, nicNSG, "deny-internet-web"},
		{"m-c", dataplane.ProtocolTCP, "198.51.100.9:40000", "10.0.3.10:80", false, subnetNSG, "deny-frontdoor"},
		{"m-c", dataplane.ProtocolTCP, "10.0.5.5:40000", "10.0.3.10:80", true, nicNSG, "AllowVnetInBound"},
		{"m-none", dataplane.ProtocolTCP, "10.0.5.5:40000", "10.0.2.20:80", false, "", dataplane.DeniedNoNSG},
		{"m-none", dataplane.ProtocolTCP, dataplane.ProbeSource.String(), "10.0.2.20:80", false, "", dataplane.DeniedNoNSG},
		{"m-plain", dataplane.ProtocolTCP, "127.0.0.1:40000", "10.0.2.11:80", false, "", dataplane.DeniedNoNSG},
	}
	for _, tc := range cases {
		t.Run(tc.member+" "+string(tc.proto)+" "+tc.src+" "+tc.dst, func(t *testing.T) {
			got := members[tc.member].Security.Evaluate(tc.proto, ap(tc.src), ap(tc.dst))
			if want := (dataplane.Verdict{Allowed: tc.allowed, NSG: tc.nsg, Rule: tc.rule}); got != want {
				t.Fatalf("verdict %+v, want %+v", got, want)
			}
		})
	}
}

// With the default Internet prefixes, every loopback address outside the
// virtual networks is the Internet: 127.0.0.1 (what Linux gives a client
// of a loopback address) and a bound 127.1.2.3, not an address in a
// virtual network on loopback.
func TestInternetIsLoopbackOutsideTheVirtualNetworks(t *testing.T) {
	h := newHandlerEnv(t, Options{})
	h.mustDo(t, 201, http.MethodPut, rgPath("rg"), `{"location":"eastus"}`)
	h.mustDo(t, 201, http.MethodPut, netPath("rg", "virtualNetworks", "lo"),
		`{"location":"eastus","properties":{"addressSpace":{"addressPrefixes":["127.240.0.0/16"]}}}`)
	h.emu.mu.RLock()
	ix := h.emu.securityIndex(h.emu.clock.Now())
	h.emu.mu.RUnlock()
	in := func(a string) bool {
		for _, p := range ix.internet {
			if p.Contains(netip.MustParseAddr(a)) {
				return true
			}
		}
		return false
	}
	for a, want := range map[string]bool{"127.0.0.1": true, "127.1.2.3": true, "127.64.0.1": true, "127.240.0.4": false, "127.241.0.1": true,
		"168.63.129.16": false, "10.0.0.1": false} {
		if in(a) != want {
			t.Errorf("%s is the Internet: %v, want %v", a, in(a), want)
		}
	}
}

// A Basic load balancer's member without NSG is open; one with an NSG is
// guarded by it.
func TestBasicIsOpenByDefault(t *testing.T) {
	h, _ := secState(t, Options{})
	h.emu.mu.RLock()
	ix := h.emu.securityIndex(h.emu.clock.Now())
	h.emu.mu.RUnlock()
	vnet := netID("rg", "virtualNetworks", "vnet")
	open := ix.memberSecurity(vnet, "", netip.MustParseAddr("10.0.2.20"), true)
	if v := open.Evaluate(dataplane.ProtocolTCP, netip.MustParseAddrPort("127.0.0.1:1"), netip.MustParseAddrPort("10.0.2.20:80")); !v.Allowed {
		t.Fatalf("a Basic member without NSG: %+v", v)
	}
	guarded := ix.memberSecurity(vnet, "", netip.MustParseAddr("10.0.1.10"), true)
	if v := guarded.Evaluate(dataplane.ProtocolTCP, netip.MustParseAddrPort("127.0.0.1:1"), netip.MustParseAddrPort("10.0.1.10:9999")); v.Allowed || v.Rule != "DenyAllInBound" {
		t.Fatalf("a Basic member with an NSG: %+v", v)
	}
	// The member's subnet is found by the entry's subnet when its vnet is
	// not given.
	bySubnet := ix.memberSecurity("", vnet+"/subnets/a", netip.MustParseAddr("10.0.1.10"), false)
	if bySubnet == nil || bySubnet.Subnet == nil {
		t.Fatalf("security by subnet: %+v", bySubnet)
	}
}
