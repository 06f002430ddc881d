package emulator

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"strings"
	"testing"

	"github.com/azlb/azlb/internal/emulator/dataplane"
)

// secRule is a valid inbound rule body with fields replaced (a nil value
// removes the field).
func secRule(name string, set map[string]any) map[string]any {
	p := map[string]any{
		"priority": 100, "direction": "Inbound", "access": "Allow", "protocol": "Tcp",
		"sourceAddressPrefix": "*", "sourcePortRange": "*", "destinationAddressPrefix": "*", "destinationPortRange": "80",
	}
	for k, v := range set {
		if v == nil {
			delete(p, k)
		} else {
			p[k] = v
		}
	}
	return map[string]any{"name": name, "properties": p}
}

func nsgBody(rules ...map[string]any) string {
	if rules == nil {
		rules = []map[string]any{}
	}
	b, _ := json.Marshal(map[string]any{"location": "eastus", "properties": map[string]any{"securityRules": rules}})
	return string(b)
}

func rulePath(nsg, rule string) string {
	return strings.Replace(netPath("rg", "networkSecurityGroups", nsg), "?", "/securityRules/"+rule+"?", 1)
}

// tagOptions configures one service tag.
var tagOptions = Options{ServiceTags: map[string][]netip.Prefix{"MyTag": {netip.MustParsePrefix("198.51.100.0/24")}}}

// Every rule is validated the same way in a whole-NSG PUT and in a
// securityRules PUT.
func TestSecurityRuleValidation(t *testing.T) {
	o := tagOptions
	o.Throttle = NoThrottle // some 250 writes at once: the rules are tested here, not the limits
	h := seedHandlerWith(t, o)
	h.mustDo(t, 201, http.MethodPut, netPath("rg", "networkSecurityGroups", "child"), nsgBody())
	long := strings.Repeat("x", 141)
	cases := []struct {
		name, rule string
		set        map[string]any
		code       string // "" for success
	}{
		{"valid", "r", nil, ""},
		{"name of 80 characters", strings.Repeat("a", 80), nil, ""},
		{"name with . - _", "a.b-c_d_", nil, ""},
		{"name of 81 characters", strings.Repeat("a", 81), nil, "InvalidResourceName"},
		{"name starting with -", "-a", nil, "InvalidResourceName"},
		{"name ending with .", "a.", nil, "InvalidResourceName"},
		{"name with a space", "a b", nil, "InvalidResourceName"},
		{"priority 99", "r", map[string]any{"priority": 99}, "SecurityRuleInvalidPriority"},
		{"priority 4097", "r", map[string]any{"priority": 4097}, "SecurityRuleInvalidPriority"},
		{"no priority", "r", map[string]any{"priority": nil}, "SecurityRuleInvalidPriority"},
		{"priority 4096", "r", map[string]any{"priority": 4096}, ""},
		{"no protocol", "r", map[string]any{"protocol": nil}, "SecurityRuleParameterRequired"},
		{"bad protocol", "r", map[string]any{"protocol": "Sctp"}, "InvalidRequestFormat"},
		{"protocol any", "r", map[string]any{"protocol": "*"}, ""},
		{"description of 140", "r", map[string]any{"description": long[:140]}, ""},
		{"description of 141", "r", map[string]any{"description": long}, "SecurityRuleDescriptionTooLong"},
		{"description not a string", "r", map[string]any{"description": 1}, "InvalidRequestFormat"},
		// Address prefixes.
		{"source CIDR", "r", map[string]any{"sourceAddressPrefix": "10.0.0.0/24"}, ""},
		{"source IP", "r", map[string]any{"sourceAddressPrefix": "10.0.0.4"}, ""},
		{"source IPv6 CIDR", "r", map[string]any{"sourceAddressPrefix": "fd00::/64"}, ""},
		{"source Internet", "r", map[string]any{"sourceAddressPrefix": "Internet"}, ""},
		{"source INTERNET (classic)", "r", map[string]any{"sourceAddressPrefix": "INTERNET"}, ""},
		{"source VIRTUAL_NETWORK (classic)", "r", map[string]any{"sourceAddressPrefix": "VIRTUAL_NETWORK"}, ""},
		{"source AzureLoadBalancer", "r", map[string]any{"sourceAddressPrefix": "AzureLoadBalancer"}, ""},
		{"source AzureFrontDoor.Backend", "r", map[string]any{"sourceAddressPrefix": "AzureFrontDoor.Backend"}, ""},
		{"source regional tag", "r", map[string]any{"sourceAddressPrefix": "Storage.EastUS"}, ""},
		{"source configured tag", "r", map[string]any{"sourceAddressPrefix": "mytag"}, ""},
		{"source unknown tag", "r", map[string]any{"sourceAddressPrefix": "NoSuchTag"}, "SecurityRuleInvalidAddressPrefix"},
		{"source non-regional tag with region", "r", map[string]any{"sourceAddressPrefix": "AzureTrafficManager.EastUS"}, "SecurityRuleInvalidAddressPrefix"},
		{"source any", "r", map[string]any{"sourceAddressPrefix": "any"}, "SecurityRuleInvalidAddressPrefix"},
		{"source bad CIDR", "r", map[string]any{"sourceAddressPrefix": "10.0.0.0/33"}, "SecurityRuleInvalidAddressPrefix"},
		{"source CIDR with host bits", "r", map[string]any{"sourceAddressPrefix": "10.0.0.1/24"}, "SecurityRuleInvalidAddressPrefix"},
		{"destination bad IP", "r", map[string]any{"destinationAddressPrefix": "10.0.0.256"}, "SecurityRuleInvalidAddressPrefix"},
		{"source prefixes", "r", map[string]any{"sourceAddressPrefix": nil, "sourceAddressPrefixes": []string{"10.0.0.0/24", "10.1.0.4"}}, ""},
		{"source prefixes with a tag", "r", map[string]any{"sourceAddressPrefix": nil, "sourceAddressPrefixes": []string{"10.0.0.0/24", "Internet"}}, "SecurityRuleParameterContainsUnsupportedValue"},
		{"source prefixes with a service tag", "r", map[string]any{"sourceAddressPrefix": nil, "sourceAddressPrefixes": []string{"AzureFrontDoor.Backend"}}, "SecurityRuleParameterContainsUnsupportedValue"},
		{"destination prefixes with *", "r", map[string]any{"destinationAddressPrefix": nil, "destinationAddressPrefixes": []string{"*"}}, "SecurityRuleParameterContainsUnsupportedValue"},
		{"destination prefixes with garbage", "r", map[string]any{"destinationAddressPrefix": nil, "destinationAddressPrefixes": []string{"x"}}, "SecurityRuleInvalidAddressPrefix"},
		{"prefixes not an array", "r", map[string]any{"sourceAddressPrefix": nil, "sourceAddressPrefixes": "10.0.0.0/24"}, "InvalidRequestFormat"},
		{"prefixes not strings", "r", map[string]any{"sourceAddressPrefix": nil, "sourceAddressPrefixes": []int{1}}, "InvalidRequestFormat"},
		{"source prefix and prefixes", "r", map[string]any{"sourceAddressPrefixes": []string{"10.0.0.0/24"}}, "SecurityRuleInvalidAddressPrefix"},
		{"no source address", "r", map[string]any{"sourceAddressPrefix": nil}, "SecurityRuleParameterRequired"},
		{"no destination address", "r", map[string]any{"destinationAddressPrefix": ""}, "SecurityRuleParameterRequired"},
		{"application security group as source", "r", map[string]any{"sourceAddressPrefix": nil,
			"sourceApplicationSecurityGroups": []any{map[string]any{"id": netID("rg", "applicationSecurityGroups", "asg")}}}, ""},
		// Port ranges.
		{"port range", "r", map[string]any{"destinationPortRange": "80-90"}, ""},
		{"port 0", "r", map[string]any{"destinationPortRange": "0"}, ""},
		{"port 65535", "r", map[string]any{"destinationPortRange": "65535"}, ""},
		{"port 65536", "r", map[string]any{"destinationPortRange": "65536"}, "SecurityRuleInvalidPortRange"},
		{"port list in the singular", "r", map[string]any{"destinationPortRange": "80,443"}, "SecurityRuleInvalidPortRange"},
		{"reversed range", "r", map[string]any{"destinationPortRange": "90-80"}, "SecurityRuleInvalidPortRange"},
		{"negative port", "r", map[string]any{"sourcePortRange": "-1"}, "SecurityRuleInvalidPortRange"},
		{"port with spaces", "r", map[string]any{"destinationPortRange": " 80"}, "SecurityRuleInvalidPortRange"},
		{"port any", "r", map[string]any{"destinationPortRange": "any"}, "SecurityRuleInvalidPortRange"},
		{"port ranges", "r", map[string]any{"destinationPortRange": nil, "destinationPortRanges": []string{"80", "443-445"}}, ""},
		{"port ranges with *", "r", map[string]any{"destinationPortRange": nil, "destinationPortRanges": []string{"*"}}, "SecurityRuleParameterContainsUnsupportedValue"},
		{"port ranges with a list", "r", map[string]any{"destinationPortRange": nil, "destinationPortRanges": []string{"80,81"}}, "SecurityRuleInvalidPortRange"},
		{"port range and ranges", "r", map[string]any{"destinationPortRanges": []string{"81"}}, "SecurityRuleInvalidPortRange"},
		{"no source port", "r", map[string]any{"sourcePortRange": nil}, "SecurityRuleParameterRequired"},
		{"no destination port", "r", map[string]any{"destinationPortRange": nil, "destinationPortRanges": []string{}}, "SecurityRuleParameterRequired"},
	}
	for _, tc := range cases {
		for _, mode := range []string{"nsg", "child"} {
			t.Run(mode+"/"+tc.name, func(t *testing.T) {
				var rec = h.do(t, http.MethodPut, netPath("rg", "networkSecurityGroups", "whole"), nsgBody(secRule(tc.rule, tc.set)), nil)
				if mode == "child" {
					h.mustDo(t, 200, http.MethodPut, netPath("rg", "networkSecurityGroups", "child"), nsgBody())
					body, _ := json.Marshal(secRule(tc.rule, tc.set))
					rec = h.do(t, http.MethodPut, rulePath("child", tc.rule), string(body), nil)
				}
				if tc.code == "" && rec.Code/100 != 2 || tc.code != "" && (rec.Code != http.StatusBadRequest || errCodeOf(rec) != tc.code) {
					t.Fatalf("%d %q, want %q: %s", rec.Code, errCodeOf(rec), tc.code, rec.Body)
				}
			})
		}
	}
}

func TestSecurityGroupLimits(t *testing.T) {
	h := seedHandler(t)
	nsgID := netID("rg", "networkSecurityGroups", "big")
	manyRules := func(n int) []map[string]any {
		var rules []map[string]any
		for i := range n {
			rules = append(rules, secRule(fmt.Sprintf("r%d", i), map[string]any{"priority": 100 + i}))
		}
		return rules
	}
	// prefixes returns n distinct /32s.
	prefixes := func(n, offset int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = netip.AddrFrom4([4]byte{10, byte(offset), byte(i >> 8), byte(i)}).String()
		}
		return out
	}
	withPrefixes := func(side string, counts ...int) []map[string]any {
		var rules []map[string]any
		for i, n := range counts {
			rules = append(rules, secRule(fmt.Sprintf("p%d", i), map[string]any{"priority": 100 + i,
				side + "AddressPrefix": nil, side + "AddressPrefixes": prefixes(n, i)}))
		}
		return rules
	}
	cases := []struct {
		name  string
		rules []map[string]any
		code  string
		msg   string
	}{
		{"1000 rules", manyRules(1000), "", ""},
		{"1001 rules", manyRules(1001), "SecurityRuleCountLimitReached", "A security group cannot have more than 1000 security rules."},
		{"4000 destination prefixes", withPrefixes("destination", 2000, 2000), "", ""},
		{"4002 destination prefixes", withPrefixes("destination", 2001, 2001), "SecurityRuleAddressesOrPortsPerSecurityGroupLimitReached",
			"Network security group " + nsgID + " has 4002 DestinationAddressPrefixes. A security group cannot have more than 4000 DestinationAddressPrefixes as per the limit MaxSecurityRuleAddressesOrPortsPerSecurityGroup."},
		{"singular prefixes count 1", append(withPrefixes("source", 2000, 1999), secRule("one", map[string]any{"priority": 4000, "sourceAddressPrefix": "10.9.0.0/16"})), "", ""},
		{"4001 source prefixes", append(withPrefixes("source", 2000, 2000), secRule("one", map[string]any{"priority": 4000, "sourceAddressPrefix": "*"})),
			"SecurityRuleAddressesOrPortsPerSecurityGroupLimitReached",
			"Network security group " + nsgID + " has 4001 SourceAddressPrefixes. A security group cannot have more than 4000 SourceAddressPrefixes as per the limit MaxSecurityRuleAddressesOrPortsPerSecurityGroup."},
		{"same priority and direction", []map[string]any{secRule("a", nil), secRule("b", nil)}, "SecurityRuleConflict",
			"Security rule b conflicts with rule a. Rules cannot have the same Priority and Direction."},
		{"same priority, other direction", []map[string]any{secRule("a", nil), secRule("b", map[string]any{"direction": "Outbound"})}, "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := h.do(t, http.MethodPut, netPath("rg", "networkSecurityGroups", "big"), nsgBody(tc.rules...), nil)
			if tc.code == "" {
				if rec.Code/100 != 2 {
					t.Fatalf("%d %s", rec.Code, rec.Body)
				}
				return
			}
			var body struct {
				Error struct{ Code, Message string }
			}
			_ = json.Unmarshal(rec.Body.Bytes(), &body)
			if rec.Code != http.StatusBadRequest || body.Error.Code != tc.code || body.Error.Message != tc.msg {
				t.Fatalf("%d %q %q, want %q %q", rec.Code, body.Error.Code, body.Error.Message, tc.code, tc.msg)
			}
		})
	}

	// The securityRules PUT counts the group's other rules.
	h.mustDo(t, 200, http.MethodPut, netPath("rg", "networkSecurityGroups", "big"), nsgBody(manyRules(1000)...))
	b, _ := json.Marshal(secRule("one-more", map[string]any{"priority": 4000}))
	rec := h.do(t, http.MethodPut, rulePath("big", "one-more"), string(b), nil)
	if rec.Code != http.StatusBadRequest || errCodeOf(rec) != "SecurityRuleCountLimitReached" {
		t.Fatalf("the 1001st rule: %d %s", rec.Code, rec.Body)
	}
	b, _ = json.Marshal(secRule("r5", map[string]any{"priority": 4000})) // replaces r5: still 1000
	h.mustDo(t, 200, http.MethodPut, rulePath("big", "r5"), string(b))
	b, _ = json.Marshal(secRule("r6", map[string]any{"priority": 4000}))
	if rec := h.do(t, http.MethodPut, rulePath("big", "r6"), string(b), nil); errCodeOf(rec) != "SecurityRuleConflict" {
		t.Fatalf("a conflicting priority: %d %s", rec.Code, rec.Body)
	}
	b, _ = json.Marshal(secRule("r7", map[string]any{"priority": 4001, "destinationAddressPrefix": nil, "destinationAddressPrefixes": prefixes(4000, 7)}))
	if rec := h.do(t, http.MethodPut, rulePath("big", "r7"), string(b), nil); errCodeOf(rec) != "SecurityRuleAddressesOrPortsPerSecurityGroupLimitReached" {
		t.Fatalf("4000 more prefixes: %d %s", rec.Code, rec.Body)
	}
}

func TestParsePortRange(t *testing.T) {
	pr := func(a, b uint16) *dataplane.PortRange { return &dataplane.PortRange{From: a, To: b} }
	for s, want := range map[string]*dataplane.PortRange{
		"*": pr(0, 65535), "0": pr(0, 0), "80": pr(80, 80), "65535": pr(65535, 65535), "80-80": pr(80, 80), "1-65535": pr(1, 65535),
		"": nil, "65536": nil, "-1": nil, "1-": nil, "-": nil, "90-80": nil, "080": nil, "8 0": nil, "80,81": nil, "1-2-3": nil,
		"+80": nil, "0x50": nil, "１": nil, "100000": nil,
	} {
		got, ok := parsePortRange(s)
		if ok != (want != nil) || want != nil && got != *want {
			t.Errorf("parsePortRange(%q) = %v, %v; want %v", s, got, ok, want)
		}
	}
}

func TestParseNSGPrefix(t *testing.T) {
	for s, want := range map[string]string{
		"10.0.0.0/8": "10.0.0.0/8", "10.0.0.4": "10.0.0.4/32", "0.0.0.0/0": "0.0.0.0/0", "fd00::/64": "fd00::/64", "::1": "::1/128",
		"10.0.0.1/8": "", "10.0.0.0/33": "", "*": "", "Internet": "", "fe80::1%eth0": "", "::ffff:10.0.0.1": "", "010.0.0.1": "", "": "",
		"10.0.0.0/": "", "/8": "",
	} {
		p, ok := parseNSGPrefix(s)
		if got := map[bool]string{true: p.String(), false: ""}[ok]; got != want {
			t.Errorf("parseNSGPrefix(%q) = %q, want %q", s, got, want)
		}
	}
}

func TestSubtractPrefixes(t *testing.T) {
	pp := func(s string) []netip.Prefix {
		var out []netip.Prefix
		for _, f := range strings.Fields(s) {
			out = append(out, netip.MustParsePrefix(f))
		}
		return out
	}
	cases := []struct{ base, remove, want string }{
		{"127.0.0.0/8", "", "127.0.0.0/8"},
		{"127.0.0.0/8", "10.0.0.0/8", "127.0.0.0/8"},
		{"127.0.0.0/8", "127.0.0.0/8", ""},
		{"127.0.0.0/8", "0.0.0.0/0", ""},
		{"10.0.0.0/30", "10.0.0.1/32", "10.0.0.0/32 10.0.0.2/31"},
		{"127.0.0.0/8", "127.240.0.0/12", "127.0.0.0/9 127.128.0.0/10 127.192.0.0/11 127.224.0.0/12"},
		{"127.0.0.0/8 fd00::/8", "127.0.0.0/9 127.128.0.0/9 fd00::/8", ""},
		{"10.0.0.0/31", "10.0.0.0/32 10.0.0.1/32", ""},
	}
	for _, tc := range cases {
		got := subtractPrefixes(pp(tc.base), pp(tc.remove))
		var s []string
		for _, p := range got {
			s = append(s, p.String())
		}
		if strings.Join(s, " ") != tc.want {
			t.Errorf("%s - %s = %v, want %s", tc.base, tc.remove, s, tc.want)
		}
	}
}
