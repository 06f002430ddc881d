package accesscontrol

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/azlb/azlb/internal/securitygroup"
)

func svc(ann map[string]string, ranges ...string) *v1.Service {
	return &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", Annotations: ann},
		Spec: v1.ServiceSpec{LoadBalancerSourceRanges: ranges}}
}

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name      string
		svc       *v1.Service
		internal  bool
		noFloat   bool
		v4, v6    string // sources of each family, rules separated by " | "
		deny      bool
		invalid   int
		conflict  string
		restrict  bool
		needRules bool
		settings  int // InvalidSettings
	}{
		{name: "public", svc: svc(nil), v4: "Internet", v6: "Internet", needRules: true},
		{name: "internal", svc: svc(nil), internal: true},
		{name: "spec ranges merged per family", svc: svc(nil, "10.0.0.0/25", " 10.0.0.128/25", "192.168.0.0/16", "10.0.0.0/8", "2001:db8::/32"),
			v4: "10.0.0.0/8,192.168.0.0/16", v6: "2001:db8::/32", restrict: true, needRules: true},
		{name: "ipv4 ranges only: ipv6 closed", svc: svc(nil, "203.0.113.0/24"), v4: "203.0.113.0/24", restrict: true, needRules: true},
		{name: "annotations merged", svc: svc(map[string]string{KeyAllowedIPRanges: "10.1.0.0/16", KeyLegacySourceRanges: "10.2.0.0/16"}),
			v4: "10.1.0.0/16,10.2.0.0/16", restrict: true, needRules: true},
		{name: "internal with ranges", svc: svc(nil, "10.1.0.0/16"), internal: true, v4: "10.1.0.0/16", restrict: true, needRules: true},
		{name: "tags", svc: svc(map[string]string{KeyAllowedServiceTags: "AzureFrontDoor.Backend, Storage.WestEurope,AzureFrontDoor.Backend"}),
			v4: "AzureFrontDoor.Backend | Storage.WestEurope", v6: "AzureFrontDoor.Backend | Storage.WestEurope", restrict: true, needRules: true},
		{name: "tags and ranges", svc: svc(map[string]string{KeyAllowedServiceTags: "AzureFrontDoor.Backend"}, "10.0.0.0/8"),
			v4: "10.0.0.0/8 | AzureFrontDoor.Backend", v6: "AzureFrontDoor.Backend", restrict: true, needRules: true},
		{name: "deny all", svc: svc(map[string]string{KeyDenyAllExceptRanges: "TRUE"}, "10.0.0.0/8"), v4: "10.0.0.0/8", deny: true, restrict: true, needRules: true},
		{name: "deny on public without sources: no effect", svc: svc(map[string]string{KeyDenyAllExceptRanges: "true"}), v4: "Internet", v6: "Internet", needRules: true},
		{name: "deny with tags", svc: svc(map[string]string{KeyDenyAllExceptRanges: "true", KeyAllowedServiceTags: "AzureCloud"}), v4: "AzureCloud", v6: "AzureCloud", deny: true, restrict: true, needRules: true},
		{name: "deny false", svc: svc(map[string]string{KeyDenyAllExceptRanges: "False"}, "10.0.0.0/8"), v4: "10.0.0.0/8", restrict: true, needRules: true},
		{name: "deny not a boolean", svc: svc(map[string]string{KeyDenyAllExceptRanges: "yes"}, "10.0.0.0/8"), conflict: `"yes" must be "true" or "false"`},
		{name: "disable not a boolean", svc: svc(map[string]string{KeyDisableNSGRule: "1"}), conflict: `"1" must be`},
		{name: "disabled", svc: svc(map[string]string{KeyDisableNSGRule: "true", KeyDenyAllExceptRanges: "true"}, "10.0.0.0/8")},
		{name: "host bits: fail closed", svc: svc(nil, "10.0.0.1/24", "192.168.0.0/16"), v4: "192.168.0.0/16", deny: true, invalid: 1, restrict: true, needRules: true},
		{name: "bare address: fail closed", svc: svc(map[string]string{KeyAllowedIPRanges: "10.0.0.1"}), deny: true, invalid: 1, restrict: true, needRules: true},
		{name: "empty entry: fail closed", svc: svc(map[string]string{KeyAllowedIPRanges: "10.0.0.0/8,"}), v4: "10.0.0.0/8", deny: true, invalid: 1, restrict: true, needRules: true},
		{name: "bad tag: fail closed, no Internet", svc: svc(map[string]string{KeyAllowedServiceTags: "Azure Front Door"}), deny: true, invalid: 1, restrict: true, needRules: true},
		{name: "spec and annotation", svc: svc(map[string]string{KeyAllowedIPRanges: "10.0.0.0/8"}, "10.0.0.0/8"), conflict: "both set"},
		{name: "deny with floating IP off", svc: svc(map[string]string{KeyDenyAllExceptRanges: "true"}, "10.0.0.0/8"), noFloat: true, conflict: "floating IP is off"},
		{name: "invalid with floating IP off", svc: svc(nil, "nope"), noFloat: true, conflict: "fail closed"},
		{name: "ranges with floating IP off", svc: svc(nil, "10.0.0.0/8"), noFloat: true, v4: "10.0.0.0/8", restrict: true, needRules: true},
		// Set but blank (issue 37, item 8): an empty Helm value is not "no
		// restriction": it fails closed, as an invalid value does.
		{name: "blank ranges annotation: fail closed", svc: svc(map[string]string{KeyAllowedIPRanges: ""}), deny: true, invalid: 1, restrict: true, needRules: true},
		{name: "blank legacy annotation: fail closed", svc: svc(map[string]string{KeyLegacySourceRanges: "  "}), deny: true, invalid: 1, restrict: true, needRules: true},
		{name: "blank ranges beside spec ranges", svc: svc(map[string]string{KeyAllowedIPRanges: ""}, "10.0.0.0/8"), v4: "10.0.0.0/8", deny: true, invalid: 1, restrict: true, needRules: true},
		{name: "blank tags: fail closed", svc: svc(map[string]string{KeyAllowedServiceTags: ""}), deny: true, invalid: 1, restrict: true, needRules: true},
		{name: "blank deny-all: fail closed", svc: svc(map[string]string{KeyDenyAllExceptRanges: ""}), deny: true, settings: 1, restrict: true, needRules: true},
		{name: "blank no-nsg-rule: rules kept, fail closed", svc: svc(map[string]string{KeyDisableNSGRule: ""}), deny: true, settings: 1, restrict: true, needRules: true},
		{name: "blank with floating IP off", svc: svc(map[string]string{KeyAllowedIPRanges: ""}), noFloat: true, conflict: "blank"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := Parse(tc.svc, tc.internal, !tc.noFloat)
			if tc.conflict != "" {
				var ce *ConflictError
				var ie *InvalidError
				if (!errors.As(err, &ce) && !errors.As(err, &ie)) || !strings.Contains(err.Error(), tc.conflict) {
					t.Fatalf("err = %v, want a ConflictError about %q", err, tc.conflict)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			show := func(f v1.IPFamily) string {
				var parts []string
				for _, s := range a.Sources(f) {
					parts = append(parts, strings.Join(s, ","))
				}
				return strings.Join(parts, " | ")
			}
			if got := show(v1.IPv4Protocol); got != tc.v4 {
				t.Errorf("IPv4 sources = %q, want %q", got, tc.v4)
			}
			if got := show(v1.IPv6Protocol); got != tc.v6 {
				t.Errorf("IPv6 sources = %q, want %q", got, tc.v6)
			}
			if a.DenyAll != tc.deny || len(a.InvalidRanges)+len(a.InvalidTags) != tc.invalid || len(a.InvalidSettings) != tc.settings || a.Restricted() != tc.restrict || a.NeedsRules() != tc.needRules {
				t.Errorf("deny=%v invalid=%v/%v/%v restricted=%v needsRules=%v", a.DenyAll, a.InvalidRanges, a.InvalidTags, a.InvalidSettings, a.Restricted(), a.NeedsRules())
			}
			for _, v := range append(append(a.InvalidRanges, a.InvalidTags...), a.InvalidSettings...) {
				if !strings.Contains(v, `"`) {
					t.Errorf("invalid value not quoted: %s", v)
				}
			}
		})
	}
}

func TestMerge(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"10.0.0.0/25 10.0.0.128/25", "[10.0.0.0/24]"},
		{"10.0.0.0/24 10.0.1.0/24 10.0.2.0/23", "[10.0.0.0/22]"},
		{"10.0.0.128/25 10.0.1.0/25", "[10.0.0.128/25 10.0.1.0/25]"}, // adjacent but not siblings
		{"10.0.0.0/8 10.1.2.0/24 0.0.0.0/0", "[0.0.0.0/0]"},
		{"2001:db8::/33 2001:db8:8000::/33", "[2001:db8::/32]"},
	} {
		var ps []netip.Prefix
		for _, s := range strings.Fields(tc.in) {
			ps = append(ps, netip.MustParsePrefix(s))
		}
		if got := fmt.Sprint(Merge(ps)); got != tc.want {
			t.Errorf("Merge(%s) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

func TestGrants(t *testing.T) {
	a, err := Parse(svc(map[string]string{KeyDenyAllExceptRanges: "true"}, "10.0.0.0/8", "2001:db8::/32"), false, true)
	if err != nil {
		t.Fatal(err)
	}
	ports := []Port{{Protocol: v1.ProtocolTCP, Number: 80}, {Protocol: v1.ProtocolTCP, Number: 443}, {Protocol: v1.ProtocolUDP, Number: 53}, {Protocol: v1.ProtocolSCTP, Number: 9}}
	allows, denies := a.Grants(ports, map[v1.IPFamily][]string{v1.IPv4Protocol: {"20.0.0.1"}, v1.IPv6Protocol: {"2001:db8:1::1"}})
	var got []string
	for _, al := range allows {
		got = append(got, fmt.Sprintf("%s %s %v %v %v", al.Family, al.Protocol, al.Sources, al.Ports, al.Destinations))
	}
	want := []string{
		"IPv4 * [10.0.0.0/8] [9] [20.0.0.1]",
		"IPv4 Tcp [10.0.0.0/8] [443 80] [20.0.0.1]",
		"IPv4 Udp [10.0.0.0/8] [53] [20.0.0.1]",
		"IPv6 * [2001:db8::/32] [9] [2001:db8:1::1]",
		"IPv6 Tcp [2001:db8::/32] [443 80] [2001:db8:1::1]",
		"IPv6 Udp [2001:db8::/32] [53] [2001:db8:1::1]",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("allows:\n got %v\nwant %v", got, want)
	}
	if fmt.Sprint(denies) != fmt.Sprint([]securitygroup.Deny{{Family: securitygroup.IPv4, Destinations: []string{"20.0.0.1"}}, {Family: securitygroup.IPv6, Destinations: []string{"2001:db8:1::1"}}}) {
		t.Errorf("denies = %v", denies)
	}
}
