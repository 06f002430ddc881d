package names_test

import (
	"regexp"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/azlb/azlb/internal/names"
)

// poolNameRule is ARM's rule for backend pool names.
var poolNameRule = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9_.-]{0,78}[A-Za-z0-9_])?$`)

func TestLocalServicePool(t *testing.T) {
	long63 := strings.Repeat("n", 63)
	cases := []struct {
		ns, name string
		family   v1.IPFamily
		want     string
	}{
		{"default", "web", v1.IPv4Protocol, "default.web"},
		{"default", "web", v1.IPv6Protocol, "default.web.IPv6"},
		{"a-b", "c", v1.IPv4Protocol, "a-b.c"},
		{"a", "b-c", v1.IPv4Protocol, "a.b-c"},
	}
	for _, tc := range cases {
		if got := names.LocalServicePool(tc.ns, tc.name, tc.family); got != tc.want {
			t.Errorf("LocalServicePool(%s, %s, %s) = %s, want %s", tc.ns, tc.name, tc.family, got, tc.want)
		}
	}
	// Long names are cut and hashed; both families stay within ARM's rule.
	v4 := names.LocalServicePool(long63, long63, v1.IPv4Protocol)
	v6 := names.LocalServicePool(long63, long63, v1.IPv6Protocol)
	if !poolNameRule.MatchString(v4) || !poolNameRule.MatchString(v6) || v6 != v4+".IPv6" || len(v4) != 75 {
		t.Errorf("long names: %q (%d), %q", v4, len(v4), v6)
	}
	other := names.LocalServicePool(long63, long63[:62]+"m", v1.IPv4Protocol)
	if other == v4 {
		t.Error("two long names that share their first 62 characters got one pool")
	}
	// The longest uncut name.
	if got := names.LocalServicePool(long63, strings.Repeat("x", 10), v1.IPv6Protocol); got != long63+"."+strings.Repeat("x", 10)+".IPv6" || len(got) != 79 {
		t.Errorf("74-character base: %q (%d)", got, len(got))
	}
}

// The pairs that collided under the legacy scheme do not collide, even
// compared case-insensitively as ARM compares names.
func TestLocalServicePoolIsUnambiguous(t *testing.T) {
	pairs := [][2][3]string{
		{{"a-b", "c", "IPv4"}, {"a", "b-c", "IPv4"}},
		{{"a", "b", "IPv6"}, {"a", "b-ipv6", "IPv4"}},
	}
	for _, p := range pairs {
		one := names.LocalServicePool(p[0][0], p[0][1], v1.IPFamily(p[0][2]))
		two := names.LocalServicePool(p[1][0], p[1][1], v1.IPFamily(p[1][2]))
		if strings.EqualFold(one, two) {
			t.Errorf("%v and %v share the pool %s", p[0], p[1], one)
		}
	}
	if names.LegacyLocalServicePool("a-b", "c", v1.IPv4Protocol) != names.LegacyLocalServicePool("a", "b-c", v1.IPv4Protocol) {
		t.Error("the legacy names are expected to collide (that is why they are only adopted)")
	}
}

// FuzzLocalServicePool: for any namespace and name Kubernetes accepts, the
// pool name is one ARM accepts, and the IPv6 name differs from every IPv4
// name of a Service in the same namespace.
func FuzzLocalServicePool(f *testing.F) {
	f.Add("default", "web")
	f.Add("a-b", "c")
	f.Add(strings.Repeat("a", 63), strings.Repeat("b", 63))
	label := regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)
	f.Fuzz(func(t *testing.T, ns, name string) {
		if !label.MatchString(ns) || !label.MatchString(name) {
			return
		}
		for _, fam := range []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol} {
			if got := names.LocalServicePool(ns, name, fam); !poolNameRule.MatchString(got) {
				t.Fatalf("LocalServicePool(%q, %q, %s) = %q breaks ARM's name rule", ns, name, fam, got)
			}
		}
		v6 := names.LocalServicePool(ns, name, v1.IPv6Protocol)
		if strings.EqualFold(v6, names.LocalServicePool(ns, name+"-ipv6", v1.IPv4Protocol)) {
			t.Fatalf("IPv6 pool of %s/%s collides", ns, name)
		}
	})
}

func TestParseID(t *testing.T) {
	rg, name, err := names.ParseID("/subscriptions/s/resourceGroups/RG/providers/Microsoft.Network/publicIPAddresses/pip-1")
	if err != nil || rg != "RG" || name != "pip-1" {
		t.Errorf("ParseID = %q, %q, %v", rg, name, err)
	}
	for _, bad := range []string{"", "pip-1", "/subscriptions/s", "/subscriptions/s/resourceGroups/"} {
		if _, _, err := names.ParseID(bad); err == nil || !strings.Contains(err.Error(), "malformed ARM resource id") {
			t.Errorf("ParseID(%q) err = %v, want a malformed-id error quoting it", bad, err)
		}
	}
}

func TestChildOfAndLoadBalancerNames(t *testing.T) {
	ref := names.LoadBalancerRef{Subscription: "s", ResourceGroup: "rg", Name: "kubernetes"}
	id := ref.Child("backendAddressPools", "default.web")
	if !names.ChildOf(id, "backendAddressPools", "DEFAULT.WEB") || names.ChildOf(id, "backendAddressPools", "web") {
		t.Errorf("ChildOf(%s)", id)
	}
	if names.LoadBalancer("lb-2", true) != "lb-2-internal" || !names.IsInternalLB("LB-2-INTERNAL") || names.PublicLB("lb-2-Internal") != "lb-2" {
		t.Error("internal twin names")
	}
	if names.ServiceBaseOfFrontend("abc-ipv6") != "abc" || names.ServiceBaseOfFrontend("abc") != "abc" {
		t.Error("ServiceBaseOfFrontend")
	}
}

func TestPodIPNames(t *testing.T) {
	const uid = "6F9619FF-8B86-D011-B42D-00C04FC964FF"
	if got := names.ServiceUID(uid); got != "6f9619ff-8b86-d011-b42d-00c04fc964ff" {
		t.Errorf("ServiceUID = %q", got)
	}
	if got := names.ServicePublicIP(uid); got != "6f9619ff-8b86-d011-b42d-00c04fc964ff-pip" {
		t.Errorf("ServicePublicIP = %q", got)
	}
	if got := names.ServiceRule(v1.ProtocolUDP, 53); got != "rule-udp-53" {
		t.Errorf("ServiceRule = %q", got)
	}
	for name, want := range map[string]string{
		"6f9619ff-8b86-d011-b42d-00c04fc964ff-pip":    "6f9619ff-8b86-d011-b42d-00c04fc964ff",
		"6F9619FF-8B86-D011-B42D-00C04FC964FF-PIP":    "6f9619ff-8b86-d011-b42d-00c04fc964ff",
		"default-natgw-pip":                           "",
		"6f9619ff-8b86-d011-b42d-00c04fc964ff":        "",
		"6f9619ff-8b86-d011-b42d-00c04fc964ffx-pip":   "",
		"kubernetes-a6f9619ff8b86d011b42d00c04fc964f": "",
	} {
		got, ok := names.UIDOfServicePublicIP(name)
		if got != want || ok != (want != "") {
			t.Errorf("names.UIDOfServicePublicIP(%q) = %q, %v", name, got, ok)
		}
	}
	if names.IsUID("6f9619ff-8b86-d011-b42d-00c04fc964fg") || names.IsUID("") || !names.IsUID("00000000-0000-0000-0000-000000000000") {
		t.Error("IsUID")
	}
}

func TestServiceBaseOf(t *testing.T) {
	base := "a1111111122223333444455555555555"
	for name, want := range map[string]string{
		base:                  base,
		base + "-IPv6":        base,
		base + "-TCP-80":      base,
		base + "-UDP-53-IPv6": base,
		base + "-HA":          base,
		base + "-" + "sub":    base,
		"kubernetes":          "kubernetes",
	} {
		if got := names.ServiceBaseOf(name); got != want {
			t.Errorf("ServiceBaseOf(%q) = %q, want %q", name, got, want)
		}
	}
}
